package store_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store/storetest"
)

var _ = DescribeTable("storetest.IsRead tells reads from writes that return rows",
	func(sql string, read bool) {
		Expect(storetest.IsRead(sql)).To(Equal(read))
	},
	Entry("a SELECT", `SELECT * FROM trips WHERE id = $1`, true),
	Entry("a SELECT in parentheses, as GORM writes a union", `(SELECT 1) UNION (SELECT 2)`, true),
	Entry("a WITH query that reads", `WITH recent AS (SELECT id FROM trips) SELECT count(*) FROM recent`, true),
	Entry("a dry run, which GORM builds no text for", ``, true),
	Entry("an INSERT … RETURNING", `INSERT INTO events (id) VALUES ($1) RETURNING seq`, false),
	Entry("a claim: WITH … INSERT", `WITH async AS (SELECT set_config('synchronous_commit', 'off', true)) INSERT INTO idempotency_records (account) SELECT $1 FROM async`, false),
	Entry("a WITH whose part updates", `WITH moved AS (UPDATE trips SET status = $1 RETURNING id) SELECT id FROM moved`, false),
	Entry("an UPDATE … RETURNING in lower case", `update drivers set available = false where id = $1 returning id`, false),
	Entry("a DELETE … RETURNING", `DELETE FROM idempotency_records WHERE expires_at < $1 RETURNING idem_key`, false),
)
