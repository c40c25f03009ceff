package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rideapi/ride/gen"
	"github.com/rideapi/ride/openapi"
	"github.com/rideapi/ride/server/pipeline"
	"github.com/rideapi/ride/server/problem"
)

// publishedDocuments holds the OpenAPI document as JSON, converted once at start from the
// YAML as maintained (not from the generated code's copy, which renames and reorders).
type publishedDocuments struct {
	json pipeline.Static
}

func newPublishedDocuments() (*publishedDocuments, error) {
	b, err := openapi.JSON()
	if err != nil {
		return nil, fmt.Errorf("render OpenAPI JSON: %w", err)
	}
	return &publishedDocuments{json: pipeline.NewStatic(b)}, nil
}

// documentResponse writes a precomputed document; re-encoding a 100 KB document per request
// would be waste.
type documentResponse struct {
	contentType string
	body        pipeline.Static
}

func (d documentResponse) write(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", d.contentType)
	w.WriteHeader(http.StatusOK)
	return pipeline.WriteStatic(w, d.body)
}

// yamlDocument is the document as maintained, as published.
var yamlDocument = pipeline.NewStatic(openapi.YAML)

func (d documentResponse) VisitGetOpenApiJsonResponse(w http.ResponseWriter) error { return d.write(w) }
func (d documentResponse) VisitGetOpenApiYamlResponse(w http.ResponseWriter) error { return d.write(w) }

// GetOpenApiJson publishes the document as JSON.
func (s *Server) GetOpenApiJson(context.Context, gen.GetOpenApiJsonRequestObject) (gen.GetOpenApiJsonResponseObject, error) {
	return documentResponse{contentType: "application/json", body: s.docs.json}, nil
}

// GetOpenApiYaml publishes the document exactly as maintained.
func (s *Server) GetOpenApiYaml(context.Context, gen.GetOpenApiYamlRequestObject) (gen.GetOpenApiYamlResponseObject, error) {
	return documentResponse{contentType: "application/yaml", body: yamlDocument}, nil
}

// GetHealth answers while the process runs.
func (s *Server) GetHealth(context.Context, gen.GetHealthRequestObject) (gen.GetHealthResponseObject, error) {
	return gen.GetHealth200JSONResponse{Body: gen.Health{Status: "ok"}}, nil
}

// GetReadiness answers 200 only once the server is ready (migrations done) and while the
// database answers.
func (s *Server) GetReadiness(ctx context.Context, _ gen.GetReadinessRequestObject) (gen.GetReadinessResponseObject, error) {
	if !s.ready.Load() {
		return nil, problem.New(problem.Unavailable, "The server is starting (migrations are running) or shutting down.")
	}
	ctx, cancel := context.WithTimeout(ctx, pipeline.ReadinessTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		p := problem.New(problem.Unavailable, "The database is unreachable.")
		p.Err = err
		return nil, p
	}
	return gen.GetReadiness200JSONResponse{Body: gen.Health{Status: "ready"}}, nil
}
