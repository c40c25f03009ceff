package store_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/rideapi/ride/store"
)

var _ = Describe("Transactions", func() {
	for _, e := range engines {
		if e.name != "PostgreSQL" {
			continue // SQLite's transactions are serializable, one writer at a time
		}
		It("are READ COMMITTED on "+e.name+" even where the database's default is stricter", func(ctx SpecContext) {
			url := e.newDatabase(ctx)
			admin := openStore(ctx, url)
			Expect(admin.TestDB().Exec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = %L', current_database(), 'repeatable read'); END $$`).Error).To(Succeed())
			admin.Close()

			// Connections opened from now on take the database's new default.
			st := openStore(ctx, url)
			var outside, inside string
			Expect(st.TestDB().Raw(`SHOW transaction_isolation`).Scan(&outside).Error).To(Succeed())
			Expect(outside).To(Equal("repeatable read"))
			Expect(st.WithTx(ctx, func(tx *store.Store) error {
				return tx.TestDB().Raw(`SHOW transaction_isolation`).Scan(&inside).Error
			})).To(Succeed())
			Expect(inside).To(Equal("read committed"))
		})
	}
})
