package server

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"path"

	"github.com/labstack/echo/v4"
	swaggerfiles "github.com/swaggo/files/v2"

	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/problem"
)

// Routes served beside the OpenAPI document rather than from it: the metrics scrape and the
// human-readable reference. They need no API key and the gate lets them through unchecked.
// They are kept out of the document on purpose: they are not part of the API a client
// program calls (an HTML page and a Prometheus exposition), so generated clients stay clean
// and the pages may change without the v1 compatibility gate.
const (
	routeMetrics    = "/metrics"
	routeDocs       = "/docs"
	routeProblems   = "/docs/problems"
	routeDocsAssets = "/docs/assets/*"
)

// routesOutsideDocument are those routes, for the pipeline.
var routesOutsideDocument = []string{routeMetrics, routeDocs, routeProblems, routeDocsAssets}

func (s *Server) registerOutsideDocument(e *echo.Echo) {
	e.GET(routeMetrics, echo.WrapHandler(s.metrics.Handler()))
	e.GET(routeDocs, s.docsPage)
	e.GET(routeProblems, s.problemsPage)
	e.GET(routeDocsAssets, s.docsAsset)
}

// docsCSP lets the reference page load only what the binary serves: Swagger UI's script and
// stylesheet, and the document from /v1/openapi.json. Swagger UI styles elements inline and
// draws icons as data: images.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// docsHTML is the reference page: Swagger UI (embedded from github.com/swaggo/files/v2, so it
// works with no internet access) rendering /v1/openapi.json.
const docsHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Ride API reference</title>
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png" sizes="32x32">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="stylesheet" href="/docs/assets/ride.css">
</head>
<body>
<nav class="ride-nav">
  <strong>Ride API</strong>
  <a href="/docs/problems">Problem types</a>
  <a href="/v1/openapi.json">openapi.json</a>
  <a href="/v1/openapi.yaml">openapi.yaml</a>
</nav>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/ride-docs.js"></script>
</body>
</html>
`

// docsJS starts Swagger UI on the published document. It points "Try it out" at the server
// that serves the page, whatever the document's servers list says.
const docsJS = `"use strict";
fetch("/v1/openapi.json")
  .then(function (response) { return response.json(); })
  .then(function (spec) {
    spec.servers = [{ url: window.location.origin, description: "This server" }];
    window.ui = SwaggerUIBundle({
      spec: spec,
      dom_id: "#swagger-ui",
      deepLinking: true,
      filter: true,
      displayRequestDuration: true,
      defaultModelsExpandDepth: 0,
      presets: [SwaggerUIBundle.presets.apis],
      layout: "BaseLayout"
    });
  });
`

const docsCSS = `body { margin: 0; font-family: sans-serif; }
.ride-nav { display: flex; gap: 1.5em; align-items: baseline; padding: 0.8em 1.5em; background: #1b1b1b; color: #fff; }
.ride-nav a { color: #9fd3ff; text-decoration: none; }
`

// docsAssets are the files the reference page loads, read once from the embedded bundle.
var docsAssets = func() map[string]documentResponse {
	assets := map[string]documentResponse{
		"ride-docs.js": {contentType: "text/javascript; charset=utf-8", body: pipeline.NewStatic([]byte(docsJS))},
		"ride.css":     {contentType: "text/css; charset=utf-8", body: pipeline.NewStatic([]byte(docsCSS))},
	}
	for name, contentType := range map[string]string{
		"swagger-ui.css":       "text/css; charset=utf-8",
		"swagger-ui-bundle.js": "text/javascript; charset=utf-8",
		"favicon-32x32.png":    "image/png",
		"favicon-16x16.png":    "image/png",
	} {
		body, err := fs.ReadFile(swaggerfiles.FS, name)
		if err != nil {
			panic(fmt.Sprintf("swagger UI asset %s missing from github.com/swaggo/files/v2: %v", name, err))
		}
		assets[name] = documentResponse{contentType: contentType, body: pipeline.NewStatic(body)}
	}
	return assets
}()

// docsPageBody is the reference page, as served.
var docsPageBody = pipeline.NewStatic([]byte(docsHTML))

func (s *Server) docsPage(c echo.Context) error {
	return writeDocsPage(c, "text/html; charset=utf-8", docsPageBody)
}

func (s *Server) docsAsset(c echo.Context) error {
	asset, ok := docsAssets[path.Clean(c.Param("*"))]
	if !ok {
		return problem.New(problem.NotFound, "No such file of the reference page.")
	}
	// The bundle changes only with the module version; an hour of reuse spares reloads.
	c.Response().Header().Set("Cache-Control", "public, max-age=3600")
	return writeDocsPage(c, asset.contentType, asset.body)
}

func writeDocsPage(c echo.Context, contentType string, body pipeline.Static) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", docsCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	return documentResponse{contentType: contentType, body: body}.write(c.Response())
}

var problemsTemplate = template.Must(template.New("problems").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Ride API problem types</title>
<link rel="stylesheet" href="/docs/assets/ride.css">
<style>
main { max-width: 60em; margin: 1.5em auto; padding: 0 1.5em; line-height: 1.45; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 0.5em 0.7em; border-bottom: 1px solid #ddd; }
tr:target { background: #fff6cc; }
</style>
</head>
<body>
<nav class="ride-nav"><strong>Ride API</strong><a href="/docs">Reference</a></nav>
<main>
<h1>Problem types</h1>
<p>Every error answer is an RFC 9457 problem (<code>application/problem+json</code>) whose
<code>type</code> is <code>/docs/problems#&lt;code&gt;</code> and whose <code>code</code> is one of
these stable identifiers. Branch on <code>code</code>; <code>detail</code> is for people, and
<code>errors[]</code> names each invalid input.</p>
<table>
<thead><tr><th>code</th><th>status</th><th>title</th><th>meaning</th></tr></thead>
<tbody>
{{range .}}<tr id="{{.Code}}"><td><a href="#{{.Code}}"><code>{{.Code}}</code></a></td><td>{{if .Status}}{{.Status}}{{end}}</td><td>{{.Title}}</td><td>{{.Meaning}}</td></tr>
{{end}}</tbody>
</table>
</main>
</body>
</html>
`))

// problemsPageBody is the page of problem types, rendered once: the catalogue is fixed.
var problemsPageBody = func() pipeline.Static {
	var buf bytes.Buffer
	if err := problemsTemplate.Execute(&buf, problem.Catalogue()); err != nil {
		panic(fmt.Sprintf("render the problem types page: %v", err))
	}
	return pipeline.NewStatic(buf.Bytes())
}()

func (s *Server) problemsPage(c echo.Context) error {
	return writeDocsPage(c, "text/html; charset=utf-8", problemsPageBody)
}
