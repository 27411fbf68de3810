module skarv/tests/drivers/go

go 1.24.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	gorm.io/driver/mysql v1.5.7
	gorm.io/gorm v1.31.2
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	golang.org/x/text v0.20.0 // indirect
)
