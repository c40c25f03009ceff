// A consumer's first journey with a client generated from openapi/ride.yaml: the types come
// from openapi-typescript (schema.d.ts), the calls from openapi-fetch. tsc refuses to build it
// when the document and the code disagree; node runs it against a live server.
//
//   RIDE_API_URL=http://localhost:8080 RIDE_API_KEY=rk_… RIDE_CITY=london node build/journey.js
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Trip = components["schemas"]["Trip"];

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name}`);
  return value;
}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`journey failed: ${message}`);
}

const client = createClient<paths>({
  baseUrl: need("RIDE_API_URL"),
  headers: { Authorization: `Bearer ${need("RIDE_API_KEY")}` },
});
const city = need("RIDE_CITY");

// 1. The first page of a city's trips, two at a time.
const first = await client.GET("/v1/trips", { params: { query: { city, limit: 2 } } });
check(first.data !== undefined, `list trips answered ${first.response.status}`);
const firstPage: Trip[] = first.data.data;
check(firstPage.length === 2, `first page has ${firstPage.length} trips`);
check(first.data.pagination.has_more, "first page says nothing follows");
const cursor = first.data.pagination.next_cursor;
check(typeof cursor === "string", "first page has no next_cursor");

// 2. Follow next_cursor.
const second = await client.GET("/v1/trips", { params: { query: { city, limit: 2, cursor } } });
check(second.data !== undefined, `next page answered ${second.response.status}`);
const seen = new Set(firstPage.map((trip) => trip.id));
for (const trip of second.data.data) check(!seen.has(trip.id), `trip ${trip.id} repeated`);
const all = [...firstPage, ...second.data.data];

// 3. One trip, with its driver's summary.
const wanted = all[0];
check(wanted !== undefined, "no trip to read");
const one = await client.GET("/v1/trips/{tripId}", { params: { path: { tripId: wanted.id } } });
check(one.data !== undefined, `get trip answered ${one.response.status}`);
check(one.data.id === wanted.id, "got another trip");
check(one.data.status === wanted.status, "status differs between list and read");

// 4. A mistake answers a problem with a stable code to branch on.
const bad = await client.GET("/v1/trips", { params: { query: { limit: 500 } } });
check(bad.data === undefined && bad.error !== undefined, "limit=500 was accepted");
check(bad.response.status === 400, `limit=500 answered ${bad.response.status}`);
check(bad.error.code === "invalid_limit", `limit=500 answered code ${bad.error.code}`);
check(bad.response.headers.get("content-type") === "application/problem+json", "problem is not problem+json");

// 5. Events narrow by their `type` without a cast: each variant's `type` is a one-value enum,
// so `e.type === "trip.completed"` leaves the trip.completed variant, whose data has a fare.
const events = await client.GET("/v1/events", { params: { query: { type: "trip.completed", limit: 5 } } });
check(events.data !== undefined, `list events answered ${events.response.status}`);
const fares: number[] = [];
for (const e of events.data.data) {
  if (e.type === "trip.completed") fares.push(e.data.fare.total);
  else if (e.type === "payment.failed") check(false, `a payment.failed event (${e.data.failure_code}) in a list of trip.completed`);
}
check(fares.length > 0, "no trip.completed event");

console.log(JSON.stringify({ journey: "ok", trips: all.map((trip) => trip.id), trip: one.data.id, problem: bad.error.code, fares }));
