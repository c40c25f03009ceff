package store_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Statement sessions", func() {
	forEachEngine(func(e *testEngine) {
		// Each statement builds its GORM statement in place: two statements sharing one
		// would run each other's conditions, and two requests would race on it.
		ownStatement := func(ctx context.Context, st *store.Store) {
			first, second := st.StatementSession(ctx), st.StatementSession(ctx)
			Expect(first.Statement).NotTo(BeIdenticalTo(second.Statement))
			first.Where("id = ?", "x").Table("trips")
			next := st.StatementSession(ctx)
			Expect(next.Statement.Clauses).To(BeEmpty())
			Expect(next.Statement.Table).To(BeEmpty())
			Expect(next.Statement.Context).To(BeIdenticalTo(ctx))
		}

		It("gives every statement on "+e.name+" a statement of its own, bound to its context", func(ctx SpecContext) {
			ownStatement(ctx, e.shared)
		})

		It("gives every statement of a transaction on "+e.name+" a statement of its own, in the transaction", func(ctx SpecContext) {
			Expect(e.shared.WithTx(ctx, func(tx *store.Store) error {
				ownStatement(ctx, tx)
				_, inTx := tx.StatementSession(ctx).Statement.ConnPool.(gorm.TxCommitter)
				Expect(inTx).To(BeTrue())
				return nil
			})).To(Succeed())
		})
	})
})
