// A partner's whole journey through a client that @hey-api/openapi-ts generated from
// openapi/ride.yaml (out/hey-api, made by run.sh): estimate, book, move the trip with If-Match,
// pay with an Idempotency-Key and replay it, read the receipt and the events. Every body is
// typed by the generated code; tsc refuses to build the journey when the document and the code
// disagree. Every answer is also parsed by the zod schema openapi-zod-client generated for it
// (out/zod): importing that module at all needs each Event variant's `type` to be a literal.
// run.sh runs it against the server directly and through Prism's validating proxy.
//
//   RIDE_API_URL=… RIDE_ADMIN_KEY=rk_… RIDE_RIDER_KEY=rk_… node out/build/journey.js
import { createClient } from "./out/hey-api/client";
import {
  createApiKey,
  createFareEstimate,
  createPayment,
  createRide,
  createTripCancellation,
  getTrip,
  listEvents,
  listReceipts,
  listTrips,
  updateTrip,
} from "./out/hey-api/sdk.gen";
import type { Event, Trip, TripStatus } from "./out/hey-api/types.gen";
import { schemas } from "./out/zod/ride";
import type { ZodTypeAny } from "zod";

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name}`);
  return value;
}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`journey failed: ${message}`);
}

const baseUrl = need("RIDE_API_URL");
const as = (key: string) => createClient({ baseUrl, headers: { Authorization: `Bearer ${key}` } });
const admin = as(need("RIDE_ADMIN_KEY"));
const rider = as(need("RIDE_RIDER_KEY"));
const run = Date.now().toString(36);

// conform parses an answer's body with the zod schema of its status (a problem for 4xx), so
// that openapi-zod-client's schemas are held to every answer of the journey; it returns the
// answer unchanged.
let conformed = 0;
function conform<A extends { data?: unknown; error?: unknown; response?: Response }>(schema: ZodTypeAny, answer: A): A {
  const status = answer.response?.status ?? 0;
  const body = status >= 400 ? answer.error : answer.data;
  const result = (status >= 400 ? schemas.Problem : schema).safeParse(body);
  check(result.success, `zod refused a ${status} answer: ${result.success ? "" : result.error.message}`);
  conformed++;
  return answer;
}

async function main(): Promise<void> {
  // A rider rides one trip at a time: end any the rider still has.
  for (const status of ["accepted", "arriving"] as TripStatus[]) {
    const open = conform(schemas.TripList, await listTrips({ client: rider, query: { status } }));
    check(open.data !== undefined, `list ${status} trips answered ${open.response?.status}`);
    for (const trip of open.data.data) {
      const cancelled = conform(schemas.Cancellation, await createTripCancellation({ client: rider, path: { tripId: trip.id }, body: { reason: "Plans changed" } }));
      check(cancelled.data !== undefined, `cancel answered ${cancelled.response?.status}`);
    }
  }

  // 1. Price a route, then book the estimate.
  const estimate = conform(schemas.FareEstimate, await createFareEstimate({
    client: rider,
    body: {
      origin: { lat: 37.7936, lng: -122.395, address: "1 Market St" },
      destination: { lat: 37.7599, lng: -122.4148 },
      ride_type: "comfort",
    },
  }));
  check(estimate.data !== undefined, `estimate answered ${estimate.response?.status}`);
  const booked = conform(schemas.Trip, await createRide({
    client: rider,
    headers: { "Idempotency-Key": `journey-book-${run}` },
    body: { estimate_id: estimate.data.estimate_id },
  }));
  check(booked.data !== undefined, `booking answered ${booked.response?.status}`);
  const trip: Trip = booked.data;
  check(trip.status === "accepted" && trip.driver_summary !== undefined, `booked trip is ${trip.status}`);

  // 2. The trip's driver moves it along; If-Match with a stale ETag is refused.
  const key = conform(schemas.ApiKeyCreated, await createApiKey({ client: admin, body: { role: "driver", subject: trip.driver_summary.id } }));
  check(key.data !== undefined, `driver key answered ${key.response?.status}`);
  const driver = as(key.data.secret);
  const read = conform(schemas.Trip, await getTrip({ client: driver, path: { tripId: trip.id } }));
  const etag = read.response?.headers.get("ETag") ?? null;
  check(read.data !== undefined && etag !== null, `driver read answered ${read.response?.status}`);
  const arriving = conform(schemas.Trip, await updateTrip({ client: driver, path: { tripId: trip.id }, headers: { "If-Match": etag }, body: { status: "arriving" } }));
  check(arriving.data?.status === "arriving", `arriving answered ${arriving.response?.status}`);
  const stale = conform(schemas.Trip, await updateTrip({ client: driver, path: { tripId: trip.id }, headers: { "If-Match": etag }, body: { status: "in_progress" } }));
  check(stale.response?.status === 412 && stale.error?.code === "precondition_failed", `stale If-Match answered ${stale.response?.status}`);
  for (const status of ["in_progress", "completed"] as TripStatus[]) {
    const moved = conform(schemas.Trip, await updateTrip({ client: driver, path: { tripId: trip.id }, body: { status } }));
    check(moved.data?.status === status, `${status} answered ${moved.response?.status}`);
  }
  const done = conform(schemas.Trip, await getTrip({ client: rider, path: { tripId: trip.id } }));
  check(done.data?.status === "completed" && done.data.fare !== undefined, `completed trip answered ${done.response?.status}`);
  const fare = done.data.fare;

  // 3. Pay the exact fare once; the retry with the same key replays the stored answer.
  const payment = {
    client: rider,
    headers: { "Idempotency-Key": `journey-pay-${run}` },
    body: { trip_id: trip.id, amount: fare.total, currency: fare.currency, payment_method: "pm_card_visa" },
  };
  const paid = conform(schemas.Payment, await createPayment(payment));
  check(paid.response?.status === 201 && paid.data !== undefined, `payment answered ${paid.response?.status}`);
  const replayed = conform(schemas.Payment, await createPayment(payment));
  check((replayed.response?.headers.get("Idempotent-Replayed") ?? null) === "true", "the retry was not a replay");
  check(replayed.data?.id === paid.data.id, "the replay names another payment");

  // 4. The receipt and the events, narrowed by their discriminator.
  const receipts = conform(schemas.ReceiptList, await listReceipts({ client: rider, query: { trip_id: trip.id } }));
  check(receipts.data?.data[0]?.amount === fare.total, `receipts answered ${receipts.response?.status}`);
  const events = conform(schemas.EventList, await listEvents({ client: admin, query: { limit: 20 } }));
  check(events.data !== undefined, `events answered ${events.response?.status}`);
  const completed = events.data.data.find(
    (e: Event) => e.type === "trip.completed" && e.data.trip_id === trip.id,
  );
  check(completed !== undefined && completed.type === "trip.completed", "no trip.completed event for the trip");
  check(completed.data.fare.total === fare.total, "the trip.completed event carries another fare");
  const succeeded = events.data.data.find((e: Event) => e.type === "payment.succeeded" && e.data.trip_id === trip.id);
  check(succeeded !== undefined && succeeded.type === "payment.succeeded" && succeeded.data.amount === fare.total, "no payment.succeeded event");

  console.log(`journey ok: ${trip.id} ${fare.total} ${fare.currency}, payment ${paid.data.id}; zod accepted ${conformed} answers`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
