// A GraphQL client as the ecosystem writes them, with graphql-js (pinned in package-lock.json):
// the default and the full introspection query (October 2021: schema description, repeatable
// directives, deprecated arguments, specifiedByURL), a client schema built from each answer,
// and the documented operations (schema/operations/*.graphql) validated against it and run
// over POST and GET, in both media types.
//
//   RIDE_API_URL=… RIDE_ADMIN_KEY=rk_… node graphql-client.mjs
import { readFileSync, readdirSync } from "node:fs";
import { buildClientSchema, getIntrospectionQuery, parse, validate } from "graphql";

const api = process.env.RIDE_API_URL;
const key = process.env.RIDE_ADMIN_KEY;
if (!api || !key) throw new Error("set RIDE_API_URL and RIDE_ADMIN_KEY");
const auth = { Authorization: `Bearer ${key}` };

function check(condition, message) {
  if (!condition) throw new Error(`graphql client: ${message}`);
}

async function post(query, variables, accept = "application/json") {
  const res = await fetch(`${api}/v1/graphql`, {
    method: "POST",
    headers: { ...auth, "Content-Type": "application/json", Accept: accept },
    body: JSON.stringify({ query, variables }),
  });
  check(res.headers.get("content-type") === accept, `POST answered ${res.headers.get("content-type")} to Accept: ${accept}`);
  return { status: res.status, body: await res.json() };
}

async function get(query, variables) {
  const url = new URL(`${api}/v1/graphql`);
  url.searchParams.set("query", query);
  if (variables) url.searchParams.set("variables", JSON.stringify(variables));
  const res = await fetch(url, { headers: auth });
  return { status: res.status, body: await res.json() };
}

const full = {
  descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true,
  schemaDescription: true, inputValueDeprecation: true,
};
let schema;
for (const [name, options] of [["default", undefined], ["full", full]]) {
  for (const accept of ["application/json", "application/graphql-response+json"]) {
    const { status, body } = await post(getIntrospectionQuery(options), undefined, accept);
    check(status === 200 && !body.errors, `${name} introspection answered ${status} ${JSON.stringify(body.errors)}`);
    schema = buildClientSchema(body.data); // throws on a malformed introspection answer
  }
}
check(schema.description && schema.description.length > 0, "the full introspection lost the schema's description");

// A trip to ask about: the newest the admin can see, from the REST API.
const list = await (await fetch(`${api}/v1/trips?limit=1`, { headers: auth })).json();
const tripId = list.data?.[0]?.id;
check(tripId, "no trip to ask about");

const dir = new URL("../../schema/operations/", import.meta.url);
let ran = 0;
for (const file of readdirSync(dir).filter((f) => f.endsWith(".graphql")).sort()) {
  const text = readFileSync(new URL(file, dir), "utf8");
  const errors = validate(schema, parse(text));
  check(errors.length === 0, `${file} does not validate: ${errors.map((e) => e.message).join("; ")}`);
  const variables = {};
  for (const match of text.matchAll(/\$(\w+)\s*:\s*ID!/g)) variables[match[1]] = tripId;
  for (const [how, answer] of [["POST", await post(text, variables)], ["GET", await get(text, variables)]]) {
    check(answer.status === 200 && answer.body.data, `${file} over ${how} answered ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  ran++;
}
check(ran > 0, "no documented operations found");
console.log(`graphql-js ${(await import("graphql")).version}: default and full introspection, ${ran} documented operations over POST and GET`);
