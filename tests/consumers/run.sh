#!/usr/bin/env bash
# Consumer conformance: what users do with openapi/ride.yaml, with tools nobody here wrote.
#
#   1. generate clients with openapi-generator (go; typescript-fetch), @hey-api/openapi-ts,
#      orval, openapi-zod-client and ogen, and compile each (oapi-codegen's is gen/);
#   2. lint the document with Redocly (recommended) and Spectral (spectral:oas);
#   3. start the server on a fresh demo database, run graphql-js's default and full
#      introspection queries and the documented GraphQL operations over POST and GET, and a
#      partner's whole journey through the
#      hey-api client (every answer also parsed by openapi-zod-client's schemas) and through
#      ogen's Go client, directly and through Prism's validating proxy (no violation of the
#      document, request or response), then the error catalogue (400 to 429) through the proxy
#      (no answer that breaks the document).
#
# Run from the repository root by `go tool task consumers` (after `go tool task tools:consumers`).
# Prints one summary line per tool; exits non-zero on the first failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
spec="$root/openapi/ride.yaml"
bin="$here/node_modules/.bin"
out="$here/out"
rm -rf "$out"
mkdir -p "$out/logs"

summary() { printf '  %-44s %s\n' "$1" "$2"; }

# Warnings a generator prints whatever the document says: its own deprecation notices, a wire
# name (the events filter `type`) that is a reserved word in the target language, and answers
# declared in more than one media type, of which these generators type the first: GraphQL's,
# as application/json or application/graphql-response+json with one schema, and its 400,
# whose problem+json variant (a malformed HTTP request) typed clients then see as the error
# body of a failed call.
generator_noise='CodegenIgnoreProcessor|deprecated the use of vendor extensions|reserved word|Multiple schemas found'

echo '== Client generators'
# Each language with the generator version that can build it: 4.3.1's typescript-fetch has no
# type for a JSON value of any kind (`AnyType`, used by GraphQL error paths, which mix field
# names and list indexes), and 5.0.0-beta2's go writes no models at all, whatever the document.
# 5.0.0-beta2 declares every enum as a TypeScript `enum` and types a discriminated union as
# `{ type: 'trip.created' } & TripCreatedEvent`: with the variant's one-value enum that
# intersection is `never`. Its users map the variants' `type` schemas to `string`, as here.
variant_types=$(grep -oE '^    [A-Za-z]+EventType:$' "$spec" | grep -v '^    EventType:$' | tr -d ' :' | sed 's/$/=string/' | paste -sd, -)
for version in 5.0.0-beta2; do
  jar="$here/node_modules/openapi-generator-$version/bin/openapi-generator.jar"
  java -jar "$jar" generate -i "$spec" -g typescript-fetch -o "$out/openapi-generator-$version-ts" \
    --additional-properties=typescriptThreePlus=true --type-mappings="$variant_types" \
    >"$out/logs/openapi-generator-$version-ts.log" 2>&1
  warnings=$(grep ' WARN ' "$out/logs/openapi-generator-$version-ts.log" | grep -Ev "$generator_noise" || true)
  [ -z "$warnings" ] || { echo "$warnings"; echo "openapi-generator $version typescript-fetch warns about the document" >&2; exit 1; }
  (cd "$out/openapi-generator-$version-ts" &&
    "$bin/tsc" --noEmit --strict --target ES2019 --lib ES2019,DOM,DOM.Iterable --moduleResolution node index.ts)
  summary "openapi-generator $version typescript-fetch" "0 warnings, 0 compile errors"
done

# Go clients are generated with enumClassPrefix, as the generator's documentation recommends
# for any document whose enums share member names (rider/driver/admin, succeeded/failed).
jar="$here/node_modules/openapi-generator-4.3.1/bin/openapi-generator.jar"
java -jar "$jar" generate -i "$spec" -g go -o "$out/openapi-generator-go" --package-name ride \
  --additional-properties=enumClassPrefix=true >"$out/logs/openapi-generator-go.log" 2>&1
warnings=$(grep ' WARN ' "$out/logs/openapi-generator-go.log" | grep -Ev "$generator_noise" || true)
[ -z "$warnings" ] || { echo "$warnings"; echo "openapi-generator go warns about the document" >&2; exit 1; }
(cd "$out/openapi-generator-go" && sed -i 's/^go 1\.[0-9]*$/go 1.22/' go.mod && go mod tidy >/dev/null 2>&1 && go vet ./... && go build ./...)
summary "openapi-generator 4.3.1 go" "0 warnings, 0 compile errors"

"$bin/openapi-ts" -i "$spec" -o "$out/hey-api" >"$out/logs/hey-api.log" 2>&1
"$bin/orval" -i "$spec" -o "$out/orval/ride.ts" --client fetch >"$out/logs/orval.log" 2>&1
# openapi-zod-client's module builds a discriminated union of the Event variants when it is
# imported: journey.ts imports it, and parses every answer of the journey with its schemas.
mkdir -p "$out/zod"
"$bin/openapi-zod-client" "$spec" -o "$out/zod/ride.ts" --export-schemas >"$out/logs/zod.log" 2>&1 ||
  { cat "$out/logs/zod.log"; exit 1; }
(cd "$here" && "$bin/tsc" -p tsconfig.json)
node -e 'require(process.argv[1])' "$out/build/out/zod/ride.js"
summary "@hey-api/openapi-ts, orval, openapi-zod-client" "0 compile errors; the zod module imports"
(cd "$root" && go build ./gen/...)
summary "oapi-codegen (gen/)" "0 compile errors"

# ogen, pinned as a tool of ogen/go.mod, writes ogen/rideapi for the typed Go journey
# (ogen/journey.go). It warns, whatever the document says, that it spells header names the
# canonical Go way (RateLimit-Limit as Ratelimit-Limit) and that it does not check a problem's
# `status` against the HTTP status; any other warning fails.
(cd "$here/ogen" && go tool ogen --target rideapi --package rideapi --clean "$spec") >"$out/logs/ogen.log" 2>&1 ||
  { cat "$out/logs/ogen.log"; exit 1; }
warnings=$(grep 'WARN' "$out/logs/ogen.log" | grep -Ev 'Header name is not canonical|Ensuring "status" matching HTTP status code' || true)
[ -z "$warnings" ] || { echo "$warnings"; echo "ogen warns about the document" >&2; exit 1; }
(cd "$here/ogen" && go vet ./... && go build -o "$out/ogen-journey" .)
summary "ogen 1.24.0 go (and ogen/journey.go)" "0 warnings about the document, 0 compile errors"

echo '== Linters'
"$bin/redocly" lint --extends recommended --format stylish "$spec" >"$out/logs/redocly.log" 2>&1 ||
  { cat "$out/logs/redocly.log"; exit 1; }
if grep -qiE 'warning|error' <(grep -v 'Node.js' "$out/logs/redocly.log" | grep -vE '^\s*$|║|╔|╚'); then
  cat "$out/logs/redocly.log"; echo "Redocly reports warnings" >&2; exit 1
fi
summary "redocly lint --extends recommended" "0 errors, 0 warnings"
echo 'extends: ["spectral:oas"]' >"$out/spectral-oas.yaml"
"$bin/spectral" lint --ruleset "$out/spectral-oas.yaml" --fail-severity hint "$spec" >"$out/logs/spectral.log" 2>&1 ||
  { cat "$out/logs/spectral.log"; exit 1; }
summary "spectral lint (spectral:oas)" "0 errors, 0 warnings"

echo '== A live server, directly and through Prism'
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api_port=$(free_port)
prism_port=$(free_port)
(cd "$root" && go build -o "$out/rideapi" ./server/cmd/rideapi)
export DATABASE_URL="sqlite://$out/ride.db" RIDE_ADDR="127.0.0.1:$api_port" RIDE_CURSOR_SECRET=consumer-conformance-stage
"$out/rideapi" >"$out/logs/server.log" 2>&1 &
server_pid=$!
prism_pid=
cleanup() {
  kill "$server_pid" ${prism_pid:+"$prism_pid"} 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
# Each wait lasts as long as the host takes (seeding the demo data on a busy one, say) and ends
# when what it waits for has stopped: no check passes or fails with the host's speed.
until curl -sf "http://127.0.0.1:$api_port/readyz" >/dev/null; do
  kill -0 "$server_pid" 2>/dev/null || { cat "$out/logs/server.log"; echo "the server stopped before it was ready" >&2; exit 1; }
  sleep 0.2
done
export RIDE_ADMIN_KEY RIDE_RIDER_KEY
RIDE_ADMIN_KEY=$("$out/rideapi" keys create --role admin)
RIDE_RIDER_KEY=$("$out/rideapi" keys create --role rider --subject rdr_dvhfur7vdnh2uqp7pqpr57p7xe)

RIDE_API_URL="http://127.0.0.1:$api_port" node "$out/build/journey.js" | tee "$out/logs/journey.log"
summary "journey through the hey-api client" "passed, $(grep -o 'zod accepted [0-9]* answers' "$out/logs/journey.log")"
RIDE_API_URL="http://127.0.0.1:$api_port" "$out/ogen-journey"
summary "journey through the ogen client" "passed"
RIDE_API_URL="http://127.0.0.1:$api_port" node "$here/graphql-client.mjs"
summary "graphql-js client" "introspection and documented queries passed"

"$bin/prism" proxy "$spec" "http://127.0.0.1:$api_port" --host 127.0.0.1 --port "$prism_port" \
  --errors=false >"$out/logs/prism.log" 2>&1 &
prism_pid=$!
proxy="http://127.0.0.1:$prism_port"
until curl -s -o /dev/null "$proxy/healthz"; do
  kill -0 "$prism_pid" 2>/dev/null || { cat "$out/logs/prism.log"; echo "Prism stopped before it answered" >&2; exit 1; }
  sleep 0.2
done
# settle_prism_log NAME sends a last request through Prism, recognisable in its log by NAME,
# and waits until the log shows it: Prism logs each exchange, its violations included, before
# it answers, in order, so every line of the exchanges before is there too.
settle_prism_log() {
  curl -s -o /dev/null "$proxy/readyz?settled=$1"
  until grep -q "readyz?settled=$1" "$out/logs/prism.log"; do
    kill -0 "$prism_pid" 2>/dev/null || { cat "$out/logs/prism.log"; echo "Prism stopped" >&2; exit 1; }
    sleep 0.1
  done
}
RIDE_API_URL="$proxy" node "$out/build/journey.js"
RIDE_API_URL="$proxy" "$out/ogen-journey"
settle_prism_log journey
journey_exchanges=$(($(grep -c 'Request received' "$out/logs/prism.log" || true) - 1))
if grep -q 'Violation:' "$out/logs/prism.log"; then
  grep -B2 -A6 'Violation:' "$out/logs/prism.log" | head -80
  echo "Prism found violations of the document in the journey" >&2
  exit 1
fi
summary "Prism validating proxy, both journeys" "$journey_exchanges exchanges, 0 violations"

# The error catalogue, each answer a documented problem: 400, 401, 403, 404, 406, 409, 412,
# 415, 422, 429. Each line: expected status, then curl arguments.
admin=(-H "Authorization: Bearer $RIDE_ADMIN_KEY")
rider=(-H "Authorization: Bearer $RIDE_RIDER_KEY")
json=(-H 'Content-Type: application/json')
trip=$(curl -s "${admin[@]}" "$proxy/v1/trips?status=completed&limit=1" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data[0].id))')
expect() {
  local want=$1
  shift
  local got
  got=$(curl -s -o /dev/null -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || { echo "expected $want, got $got: curl $*" >&2; exit 1; }
}
expect 400 "${admin[@]}" "$proxy/v1/trips?limit=500"
expect 400 "${admin[@]}" "$proxy/v1/trips?status=flying"
expect 401 "$proxy/v1/trips"
expect 403 "${rider[@]}" "$proxy/v1/webhook-endpoints"
expect 404 "${admin[@]}" "$proxy/v1/trips/trp_nosuchtrip0000000000000000"
expect 406 "${admin[@]}" -H 'Accept: text/csv' "$proxy/v1/trips"
expect 409 -X PUT "${admin[@]}" "${json[@]}" "$proxy/v1/trips/$trip" -d '{"status":"arriving"}'
expect 412 -X PUT "${admin[@]}" "${json[@]}" -H 'If-Match: "stale"' "$proxy/v1/trips/$trip" -d '{"status":"cancelled"}'
expect 415 -X POST "${rider[@]}" -H 'Content-Type: text/plain' "$proxy/v1/fare-estimates" -d 'x'
estimate='{"origin":{"lat":37.7936,"lng":-122.395},"destination":{"lat":37.7599,"lng":-122.4148},"ride_type":"RIDE"}'
expect 201 -X POST "${rider[@]}" "${json[@]}" -H 'Idempotency-Key: consumers-422' "$proxy/v1/fare-estimates" -d "${estimate/RIDE/economy}"
expect 422 -X POST "${rider[@]}" "${json[@]}" -H 'Idempotency-Key: consumers-422' "$proxy/v1/fare-estimates" -d "${estimate/RIDE/comfort}"
# 429: the same server on the same database and port, restarted with a budget of one read a
# day (a bucket of two) so that no refill can come between a fresh key's third read and its
# answer, however slow the host.
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
RIDE_RATE_LIMIT_READ=1 RIDE_RATE_LIMIT_PERIOD=24h "$out/rideapi" >>"$out/logs/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$api_port/readyz" >/dev/null && break
  sleep 0.2
done
budget=(-H "Authorization: Bearer $("$out/rideapi" keys create --role admin)")
expect 200 "${budget[@]}" "$proxy/v1/cities"
expect 200 "${budget[@]}" "$proxy/v1/cities"
expect 429 "${budget[@]}" "$proxy/v1/cities"

settle_prism_log catalogue
# The catalogue's requests break the document on purpose, and Prism says so; its answers may not.
exchanges=$(grep -c 'Request received' "$out/logs/prism.log" || true)
exchanges=$((exchanges - journey_exchanges - 2))
if grep -q 'Violation: response' "$out/logs/prism.log"; then
  grep -B2 -A6 'Violation: response' "$out/logs/prism.log" | head -80
  echo "Prism found answers that break the document" >&2
  exit 1
fi
summary "Prism validating proxy, error catalogue" "$exchanges exchanges, 0 response violations"
