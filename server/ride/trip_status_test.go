package ride_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/server/ride"
)

// outcome is what CheckTransition should decide for one (from, to) pair.
type outcome int

const (
	allowed outcome = iota
	noop
	refused
)

var _ = Describe("Trip lifecycle", func() {
	DescribeTable("CheckTransition over every (from, to) pair",
		func(from, to ride.TripStatus, want outcome) {
			isNoop, err := ride.CheckTransition(from, to)
			switch want {
			case allowed:
				Expect(err).NotTo(HaveOccurred())
				Expect(isNoop).To(BeFalse())
			case noop:
				Expect(err).NotTo(HaveOccurred())
				Expect(isNoop).To(BeTrue())
			case refused:
				Expect(err).To(MatchError(ride.ErrInvalidTransition))
				Expect(isNoop).To(BeFalse())
				var te *ride.TransitionError
				Expect(errors.As(err, &te)).To(BeTrue())
				Expect(te.From).To(Equal(from))
				Expect(te.To).To(Equal(to))
			}
		},
		Entry("accepted → accepted", ride.StatusAccepted, ride.StatusAccepted, noop),
		Entry("accepted → arriving", ride.StatusAccepted, ride.StatusArriving, allowed),
		Entry("accepted → in_progress", ride.StatusAccepted, ride.StatusInProgress, allowed),
		Entry("accepted → completed", ride.StatusAccepted, ride.StatusCompleted, refused),
		Entry("accepted → cancelled", ride.StatusAccepted, ride.StatusCancelled, allowed),

		Entry("arriving → accepted", ride.StatusArriving, ride.StatusAccepted, refused),
		Entry("arriving → arriving", ride.StatusArriving, ride.StatusArriving, noop),
		Entry("arriving → in_progress", ride.StatusArriving, ride.StatusInProgress, allowed),
		Entry("arriving → completed", ride.StatusArriving, ride.StatusCompleted, refused),
		Entry("arriving → cancelled", ride.StatusArriving, ride.StatusCancelled, allowed),

		Entry("in_progress → accepted", ride.StatusInProgress, ride.StatusAccepted, refused),
		Entry("in_progress → arriving", ride.StatusInProgress, ride.StatusArriving, refused),
		Entry("in_progress → in_progress", ride.StatusInProgress, ride.StatusInProgress, noop),
		Entry("in_progress → completed", ride.StatusInProgress, ride.StatusCompleted, allowed),
		Entry("in_progress → cancelled", ride.StatusInProgress, ride.StatusCancelled, refused),

		Entry("completed → accepted", ride.StatusCompleted, ride.StatusAccepted, refused),
		Entry("completed → arriving", ride.StatusCompleted, ride.StatusArriving, refused),
		Entry("completed → in_progress", ride.StatusCompleted, ride.StatusInProgress, refused),
		Entry("completed → completed", ride.StatusCompleted, ride.StatusCompleted, noop),
		Entry("completed → cancelled", ride.StatusCompleted, ride.StatusCancelled, refused),

		Entry("cancelled → accepted", ride.StatusCancelled, ride.StatusAccepted, refused),
		Entry("cancelled → arriving", ride.StatusCancelled, ride.StatusArriving, refused),
		Entry("cancelled → in_progress", ride.StatusCancelled, ride.StatusInProgress, refused),
		Entry("cancelled → completed", ride.StatusCancelled, ride.StatusCompleted, refused),
		Entry("cancelled → cancelled", ride.StatusCancelled, ride.StatusCancelled, noop),

		Entry("unknown → accepted", ride.TripStatus("bogus"), ride.StatusAccepted, refused),
		Entry("accepted → unknown", ride.StatusAccepted, ride.TripStatus("bogus"), refused),
		Entry("unknown → same unknown", ride.TripStatus("bogus"), ride.TripStatus("bogus"), refused),
		Entry("empty → empty", ride.TripStatus(""), ride.TripStatus(""), refused),
	)

	It("has a table entry for all 25 pairs of known statuses", func() {
		Expect(ride.AllStatuses).To(HaveLen(5))
	})

	DescribeTable("status predicates",
		func(s ride.TripStatus, valid, final, active bool) {
			Expect(s.Valid()).To(Equal(valid))
			Expect(s.Final()).To(Equal(final))
			Expect(s.Active()).To(Equal(active))
		},
		Entry("accepted", ride.StatusAccepted, true, false, true),
		Entry("arriving", ride.StatusArriving, true, false, true),
		Entry("in_progress", ride.StatusInProgress, true, false, true),
		Entry("completed", ride.StatusCompleted, true, true, false),
		Entry("cancelled", ride.StatusCancelled, true, true, false),
		Entry("unknown", ride.TripStatus("IN_PROGRESS"), false, false, false),
	)

	DescribeTable("EventType",
		func(to ride.TripStatus, want string) {
			Expect(ride.EventType(to)).To(Equal(want))
		},
		Entry("accepted is entered only by booking", ride.StatusAccepted, ""),
		Entry("arriving", ride.StatusArriving, "trip.arriving"),
		Entry("in_progress", ride.StatusInProgress, "trip.started"),
		Entry("completed", ride.StatusCompleted, "trip.completed"),
		Entry("cancelled", ride.StatusCancelled, "trip.cancelled"),
		Entry("unknown", ride.TripStatus("bogus"), ""),
	)

	It("explains a refused move in its message", func() {
		_, err := ride.CheckTransition(ride.StatusCompleted, ride.StatusArriving)
		Expect(err).To(MatchError(`ride: invalid transition from "completed" to "arriving"`))
	})
})
