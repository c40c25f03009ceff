package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

type reportRow struct {
	sc       *scenario
	srv, ref result
	hw       *result // the hand-written server, where the scenario has one
	cmp      *result // the -compare server
	lite     *result // the server on SQLite, where the scenario runs there
	rest     *result // the REST request for the same data, where the scenario has one
}

// ratio is one ratio measured in every round: a's req/s over b's in the same round. The tables
// give its median; the table of rounds gives every round's and their spread.
type ratio struct {
	label string
	per   []float64
	times bool // shown as 0.93× rather than 93 %
}

func rateRatio(label string, a, b *result) ratio {
	r := ratio{label: label, per: make([]float64, len(a.rounds))}
	for i := range a.rounds {
		r.per[i] = math.NaN()
		if i < len(b.rounds) && b.rounds[i].rate() > 0 {
			r.per[i] = a.rounds[i].rate() / b.rounds[i].rate()
		}
	}
	return r
}

// measured are the rounds that measured something.
func (r ratio) measured() []float64 {
	return slices.DeleteFunc(slices.Clone(r.per), math.IsNaN)
}

func (r ratio) median() float64 {
	xs := r.measured()
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

func (r ratio) spread() (lo, hi float64) {
	xs := r.measured()
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

func percent(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*x)
}

func times(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", x)
}

// ratios are the row's ratios of rates, in the order of the table of rounds.
func (r reportRow) ratios() []ratio {
	out := []ratio{rateRatio("ours / reference", &r.srv, &r.ref)}
	if r.hw != nil {
		out = append(out, rateRatio("ours / hand-written", &r.srv, r.hw), rateRatio("hand-written / reference", r.hw, &r.ref))
	}
	if r.cmp != nil {
		out = append(out, rateRatio("-compare / -rideapi", r.cmp, &r.srv))
	}
	if r.lite != nil {
		out = append(out, rateRatio("SQLite / PostgreSQL", r.lite, &r.srv))
	}
	if r.rest != nil {
		graphQL := rateRatio("GraphQL / REST", &r.srv, r.rest)
		graphQL.times = true
		out = append(out, graphQL, cpuRatio("server CPU: GraphQL / REST", &r.srv, r.rest))
	}
	return out
}

// cpuRatio is the server's CPU time per request of a over that of b, round by round.
func cpuRatio(label string, a, b *result) ratio {
	r := ratio{label: label, per: make([]float64, len(a.rounds)), times: true}
	for i := range a.rounds {
		r.per[i] = math.NaN()
		if i < len(b.rounds) && a.rounds[i].n > 0 && b.rounds[i].n > 0 && b.rounds[i].cpu.server > 0 {
			r.per[i] = (float64(a.rounds[i].cpu.server) / float64(a.rounds[i].n)) / (float64(b.rounds[i].cpu.server) / float64(b.rounds[i].n))
		}
	}
	return r
}

func (r reportRow) ratio(label string) float64 {
	for _, x := range r.ratios() {
		if x.label == label {
			return x.median()
		}
	}
	return math.NaN()
}

func report(out io.Writer, o options, rows []reportRow, depths []depthRow, took time.Duration) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	if len(rows) == 0 && len(depths) == 0 {
		fmt.Fprintf(w, "\nNo scenario's name contains -only %q.\n", o.only)
		return
	}
	fmt.Fprintf(w, "\nRide API benchmark — %s, concurrency %d, %s measured per scenario (server and reference taking turns in %d rounds) after %s warm-up (total %s)\n",
		o.data, o.concurrency, o.duration, o.rounds, o.warmup, took.Round(time.Second))
	fmt.Fprintf(w, "Every ratio is the median of the %d rounds' ratios; the table of rounds below gives each round's and their spread.\n", o.rounds)
	if len(rows) > 0 {
		mainTables(w, o, rows)
	}

	if slices.ContainsFunc(rows, func(r reportRow) bool { return r.cmp != nil }) {
		fmt.Fprintf(w, "\n-compare %s against -rideapi %s, taking turns in the same rounds\n\n", o.compare, o.rideapi)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\treq/s\tp50\tp99\terrors\t-compare / -rideapi\tCPU µs/req: server\tPostgreSQL\t-rideapi: server\tPostgreSQL\t")
		for _, r := range rows {
			c := r.cmp
			if c == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.sc.name, c.rate(), ms(c.percentile(0.5)),
				ms(c.percentile(0.99)), c.errors, percent(r.ratio("-compare / -rideapi")),
				perRequest(c.cpu.compare, c.n), perRequest(c.cpu.postgres, c.n),
				perRequest(r.srv.cpu.server, r.srv.n), perRequest(r.srv.cpu.postgres, r.srv.n))
		}
		tw.Flush()
	}

	if slices.ContainsFunc(rows, func(r reportRow) bool { return r.lite != nil }) {
		size := ""
		if info, err := os.Stat(o.sqlite); err == nil {
			size = fmt.Sprintf(", %.0f MB", float64(info.Size())/1e6)
		}
		fmt.Fprintf(w, "\nThe same reads on SQLite (%s: %s%s), the server binary with its database inside it, in the same rounds; no reference, no target\n\n",
			o.sqlite, liteDataset(o.sqliteTrips), size)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\treq/s\tp50\tp99\terrors\tSQLite / PostgreSQL\tCPU µs/req: server on SQLite\ton PostgreSQL: server\tPostgreSQL\t")
		for _, r := range rows {
			l := r.lite
			if l == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", r.sc.name, l.rate(), ms(l.percentile(0.5)),
				ms(l.percentile(0.99)), l.errors, percent(r.ratio("SQLite / PostgreSQL")), perRequest(l.cpu.sqlite, l.n),
				perRequest(r.srv.cpu.server, r.srv.n), perRequest(r.srv.cpu.postgres, r.srv.n))
		}
		tw.Flush()
	}

	if slices.ContainsFunc(rows, func(r reportRow) bool { return r.rest != nil }) {
		fmt.Fprintf(w, "\nGraphQL against the REST request for the same data, on the server in the same rounds\n\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\treq/s\tREST req/s\tGraphQL / REST\tserver CPU µs/req\tREST\tGraphQL / REST\t")
		for _, r := range rows {
			if r.rest == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t\n", r.sc.name, r.srv.rate(), r.rest.rate(),
				times(r.ratio("GraphQL / REST")), perRequest(r.srv.cpu.server, r.srv.n), perRequest(r.rest.cpu.server, r.rest.n),
				times(r.ratio("server CPU: GraphQL / REST")))
		}
		tw.Flush()
	}

	if len(depths) > 0 {
		fmt.Fprintf(w, "\nList page (status=completed, limit=20) by depth, %s each in %d rounds, all depths in the same windows (each client asks for them in turn, so req/s is each one's share); depth 0 is the first page, deeper pages start from a cursor\n\n", o.depthDuration, o.rounds)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "depth\treq/s\tp50\tp99\terrors\tp50 vs depth 0\t")
		for _, d := range depths {
			fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%d\t%s\t\n", d.depth, d.res.rate(), ms(d.res.percentile(0.5)),
				ms(d.res.percentile(0.99)), d.res.errors, times(depthRatio(d, depths[0]).median()))
		}
		tw.Flush()
	}

	fmt.Fprintf(w, "\nRatios by round: the tables above give each one's median; min–max is its spread\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "scenario\tratio\t"
	for i := range o.rounds {
		header += fmt.Sprintf("%d\t", i+1)
	}
	fmt.Fprintln(tw, header+"median\tmin–max\t")
	line := func(name string, r ratio) {
		format := percent
		if r.times {
			format = times
		}
		cells := name + "\t" + r.label + "\t"
		for i := range o.rounds {
			x := math.NaN()
			if i < len(r.per) {
				x = r.per[i]
			}
			cells += format(x) + "\t"
		}
		lo, hi := r.spread()
		fmt.Fprintf(tw, "%s%s\t%s–%s\t\n", cells, format(r.median()), strings.TrimSuffix(format(lo), " %"), format(hi))
	}
	for _, row := range rows {
		for i, r := range row.ratios() {
			name := row.sc.name
			if i > 0 {
				name = ""
			}
			line(name, r)
		}
	}
	for _, d := range depths[min(1, len(depths)):] {
		line(fmt.Sprintf("page at depth %d", d.depth), depthRatio(d, depths[0]))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nWhat the reference executes (captured from the server's own code serving one sample request):\n")
	for _, r := range rows {
		fmt.Fprintf(w, "  %s — %s\n%s", r.sc.name, r.sc.refNote, describe(r.sc.sql))
	}
}

// depthRatio is the p50 of a page at depth d over that of depth 0, round by round.
func depthRatio(d, zero depthRow) ratio {
	r := ratio{label: "p50 / depth 0", per: make([]float64, len(d.res.rounds)), times: true}
	for i := range d.res.rounds {
		r.per[i] = math.NaN()
		if i < len(zero.res.rounds) && zero.res.rounds[i].percentile(0.5) > 0 {
			r.per[i] = float64(d.res.rounds[i].percentile(0.5)) / float64(zero.res.rounds[i].percentile(0.5))
		}
	}
	return r
}

// mainTables are the scenarios' figures against the reference and the hand-written server, and
// their CPU time per request.
func mainTables(w io.Writer, o options, rows []reportRow) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\treq/s\tp50\tp99\terrors\treference req/s\tours / reference\thand-written req/s\thand-written / reference\tours / hand-written\t")
	var notes []string
	for _, r := range rows {
		hw, hwRatio, ours := "–", "–", "–"
		errors := r.srv.errors + r.ref.errors
		if r.hw != nil {
			hw, hwRatio, ours = fmt.Sprintf("%.0f", r.hw.rate()), percent(r.ratio("hand-written / reference")), percent(r.ratio("ours / hand-written"))
			errors += r.hw.errors
		}
		name := r.sc.name
		if r.sc.perRequest != "" {
			notes = append(notes, r.sc.perRequest)
			name += strings.Repeat("*", len(notes))
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", name, r.srv.rate(),
			ms(r.srv.percentile(0.5)), ms(r.srv.percentile(0.99)), errors, r.ref.rate(), percent(r.ratio("ours / reference")),
			hw, hwRatio, ours)
	}
	tw.Flush()
	for i, n := range notes {
		fmt.Fprintf(w, "%s %s\n", strings.Repeat("*", i+1), n)
	}

	fmt.Fprintf(w, "\nCPU time per request in µs, from /proc over the measured windows (the load generator and the reference's pgx client are this process)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tserver\tPostgreSQL\tload generator\treference: PostgreSQL\tpgx client\thand-written: server\tPostgreSQL\t")
	for _, r := range rows {
		hwServer, hwPostgres := "–", "–"
		if r.hw != nil {
			hwServer, hwPostgres = perRequest(r.hw.cpu.handwritten, r.hw.n), perRequest(r.hw.cpu.postgres, r.hw.n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.sc.name,
			perRequest(r.srv.cpu.server, r.srv.n), perRequest(r.srv.cpu.postgres, r.srv.n), perRequest(r.srv.cpu.self, r.srv.n),
			perRequest(r.ref.cpu.postgres, r.ref.n), perRequest(r.ref.cpu.self, r.ref.n), hwServer, hwPostgres)
	}
	tw.Flush()
	if slices.ContainsFunc(rows, func(r reportRow) bool { return r.sc.around != nil }) {
		fmt.Fprintf(w, "The booking's server and PostgreSQL figures include the fleet's %d position reports a second, for the server and the reference alike.\n", o.positions)
	}

	fmt.Fprintf(w, "\nCores kept busy over the measured windows, of the host's %d: the benchmark's processes' CPU time (server, PostgreSQL, load generator) per second; a side well below %d waited on its round trips, not on CPU\n\n", runtime.NumCPU(), runtime.NumCPU())
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tours\treference\thand-written\t")
	for _, r := range rows {
		hw := "–"
		if r.hw != nil {
			hw = r.hw.busy()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", r.sc.name, r.srv.busy(), r.ref.busy(), hw)
	}
	tw.Flush()
}

// busy is how many cores the benchmark's processes kept busy, on average, over r's measured
// windows.
func (r *result) busy() string {
	c := r.cpu
	all := c.server + c.compare + c.handwritten + c.sqlite + c.postgres + c.self
	if r.elapsed <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", all.Seconds()/r.elapsed.Seconds())
}
