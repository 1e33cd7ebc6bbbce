"""SAP HANA: snapshot reads in a REPEATABLE READ transaction at its MVCC commit ID."""
