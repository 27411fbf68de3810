module skarv/tests/drivers/go

go 1.24.0

require github.com/go-sql-driver/mysql v1.10.1

require filippo.io/edwards25519 v1.2.0 // indirect
