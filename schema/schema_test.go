package schema_test

import (
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/rideapi/ride/schema"
)

// TestEverythingIsDescribed holds the schema to its promise of a description on every type,
// field, argument and enum value: they are the documentation clients read through introspection.
func TestEverythingIsDescribed(t *testing.T) {
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "ride.graphql", Input: schema.SDL})
	if err != nil {
		t.Fatalf("schema does not load: %v", err)
	}
	for name, def := range s.Types {
		if def.BuiltIn {
			continue
		}
		if strings.TrimSpace(def.Description) == "" {
			t.Errorf("type %s has no description", name)
		}
		for _, f := range def.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			if strings.TrimSpace(f.Description) == "" {
				t.Errorf("field %s.%s has no description", name, f.Name)
			}
			for _, arg := range f.Arguments {
				if strings.TrimSpace(arg.Description) == "" {
					t.Errorf("argument %s.%s(%s) has no description", name, f.Name, arg.Name)
				}
			}
		}
		for _, v := range def.EnumValues {
			if strings.TrimSpace(v.Description) == "" {
				t.Errorf("enum value %s.%s has no description", name, v.Name)
			}
		}
	}
}

// TestNoInternalData keeps internal columns (routes, dispatch scores, cost basis, payment
// tokens, the driver's position) out of the schema, whatever their spelling.
func TestNoInternalData(t *testing.T) {
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "ride.graphql", Input: schema.SDL})
	if err != nil {
		t.Fatalf("schema does not load: %v", err)
	}
	hidden := []string{"polyline", "route", "matching", "score", "payout", "cost", "token", "payment"}
	for name, def := range s.Types {
		if def.BuiltIn {
			continue
		}
		for _, f := range def.Fields {
			for _, h := range hidden {
				if strings.Contains(strings.ToLower(f.Name), h) {
					t.Errorf("field %s.%s looks like internal data (%q)", name, f.Name, h)
				}
			}
		}
	}
	for _, f := range s.Types["Driver"].Fields {
		if f.Name == "lat" || f.Name == "lng" || f.Name == "location" {
			t.Errorf("Driver.%s exposes the driver's position, which is internal", f.Name)
		}
	}
}
