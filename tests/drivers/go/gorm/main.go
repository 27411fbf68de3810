// Command gorm exercises GORM 1.31 with its MySQL driver against a MySQL
// server (Skarv's SQL node, or MariaDB as the reference) the way an
// application uses it: AutoMigrate (twice: the second changes nothing),
// the Migrator's introspection (tables, columns and their types, indexes),
// creates with associations (has-many, belongs-to, many-to-many),
// Preload and Joins, updates by expression, soft delete, an upsert, a
// transaction with a nested one rolled back (a savepoint), a duplicate
// key, GROUP BY/HAVING, a subquery, FindInBatches, association appends
// and deletes, then the Migrator's changes (add, alter, rename and drop
// columns, rename, drop and create indexes, drop tables). It prints
// "drivers-gorm: ok" at the end, or names each failing check and exits
// non-zero.
//
// Usage: go run ./gorm -port 3306.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// The database the checks create and drop.
const testDB = "drivers_gorm"

type Company struct {
	ID   uint
	Name string `gorm:"size:64;uniqueIndex"`
}

type Language struct {
	ID   uint
	Code string `gorm:"size:8;uniqueIndex"`
}

type User struct {
	gorm.Model
	Name      string  `gorm:"size:100;index"`
	Email     *string `gorm:"size:120;uniqueIndex"`
	Age       uint8
	Birthday  *time.Time
	Score     float64 `gorm:"type:decimal(10,2)"`
	Active    bool    `gorm:"default:true"`
	CompanyID *uint
	Company   Company
	Cards     []Card
	Languages []Language `gorm:"many2many:user_languages;"`
	Meta      string     `gorm:"type:json"`
}

type Card struct {
	ID     uint
	Number string `gorm:"size:20"`
	UserID uint
}

var failed int

func check(what string, got, want interface{}) {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		fmt.Printf("drivers-gorm: %s: got %v, want %v\n", what, got, want)
		failed++
	}
}

func must(what string, err error) {
	if err != nil {
		fmt.Printf("drivers-gorm: %s: %v\n", what, err)
		failed++
	}
}

// Whether the server is Skarv (its version says so).
var skarv bool

func main() {
	host := flag.String("host", "127.0.0.1", "")
	port := flag.Int("port", 0, "")
	flag.Parse()
	quiet := &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)}
	root, err := gorm.Open(mysql.Open(fmt.Sprintf("root@tcp(%s:%d)/", *host, *port)), quiet)
	if err != nil {
		fmt.Println("drivers-gorm: connect:", err)
		os.Exit(1)
	}
	var version string
	must("version", root.Raw("SELECT VERSION()").Scan(&version).Error)
	skarv = strings.Contains(version, "Skarv")
	must("drop database", root.Exec("DROP DATABASE IF EXISTS "+testDB).Error)
	must("create database", root.Exec("CREATE DATABASE "+testDB).Error)
	dsn := fmt.Sprintf("root@tcp(%s:%d)/%s?parseTime=true&charset=utf8mb4", *host, *port, testDB)
	db, err := gorm.Open(mysql.Open(dsn), quiet)
	if err != nil {
		fmt.Println("drivers-gorm: connect:", err)
		os.Exit(1)
	}
	run(db)
	must("drop database", root.Exec("DROP DATABASE "+testDB).Error)
	if failed > 0 {
		fmt.Printf("drivers-gorm: %d checks failed\n", failed)
		os.Exit(1)
	}
	fmt.Println("drivers-gorm: ok")
}

func run(db *gorm.DB) {
	models := []interface{}{&Company{}, &Language{}, &User{}, &Card{}}
	must("automigrate", db.AutoMigrate(models...))
	must("automigrate again", db.AutoMigrate(models...))
	m := db.Migrator()
	check("has table", m.HasTable(&User{}), true)
	check("has column", m.HasColumn(&User{}, "Score"), true)
	check("has index", m.HasIndex(&User{}, "idx_users_name"), true)
	cols, err := m.ColumnTypes(&User{})
	must("column types", err)
	types := map[string]string{}
	for _, c := range cols {
		n, _ := c.Nullable()
		l, _ := c.Length()
		u, _ := c.Unique()
		p, _ := c.PrimaryKey()
		types[c.Name()] = fmt.Sprintf("%s %v %d %v %v", c.DatabaseTypeName(), n, l, u, p)
	}
	check("column id", types["id"], "bigint false 0 false true")
	check("column name", types["name"], "varchar true 100 false false")
	check("column email", types["email"], "varchar true 120 true false")
	// MySQL 8's json on Skarv, MariaDB's LONGTEXT there (docs/sql.md).
	if skarv {
		check("column meta", types["meta"], "json true 0 false false")
	} else {
		check("column meta", types["meta"], "longtext true 4294967295 false false")
	}
	check("column score", types["score"], "decimal true 0 false false")
	indexes, err := m.GetIndexes(&User{})
	must("indexes", err)
	names := map[string]string{}
	for _, i := range indexes {
		u, _ := i.Unique()
		names[i.Name()] = fmt.Sprintf("%v %v", i.Columns(), u)
	}
	check("index email", names["idx_users_email"], "[email] true")
	check("index name", names["idx_users_name"], "[name] false")

	langs := []Language{{Code: "en"}, {Code: "no"}, {Code: "de"}}
	must("languages", db.Create(&langs).Error)
	companies := []Company{{Name: "c0"}, {Name: "c1"}}
	must("companies", db.Create(&companies).Error)
	for i := 0; i < 5; i++ {
		email := fmt.Sprintf("u%d@x", i)
		born := time.Date(1990+i, 1, 2, 3, 4, 5, 0, time.UTC)
		user := User{Name: fmt.Sprintf("u%d", i), Email: &email, Age: uint8(20 + i), Birthday: &born,
			Score: float64(i) + 0.25, CompanyID: &companies[i%2].ID,
			Cards: []Card{{Number: fmt.Sprintf("n%d", i)}}, Languages: langs[:1+i%3], Meta: `{"k": 1}`}
		must("create user", db.Create(&user).Error)
	}
	var count int64
	db.Model(&User{}).Count(&count)
	check("count", count, 5)
	var users []User
	must("preload", db.Preload("Cards").Preload("Languages").Preload("Company").Order("id").Find(&users).Error)
	var seen []string
	for _, u := range users {
		seen = append(seen, fmt.Sprintf("%s/%d/%d/%s/%s/%.2f/%v", u.Name, len(u.Cards), len(u.Languages),
			u.Company.Name, u.Birthday.UTC().Format("2006-01-02T15:04:05"), u.Score, u.Active))
	}
	check("preloaded", seen, []string{
		"u0/1/1/c0/1990-01-02T03:04:05/0.25/true", "u1/1/2/c1/1991-01-02T03:04:05/1.25/true",
		"u2/1/3/c0/1992-01-02T03:04:05/2.25/true", "u3/1/1/c1/1993-01-02T03:04:05/3.25/true",
		"u4/1/2/c0/1994-01-02T03:04:05/4.25/true"})
	var joined []User
	must("joins", db.Joins("Company").Where("Company.name = ?", "c1").Order("users.id").Find(&joined).Error)
	check("joins", len(joined), 2)

	must("update", db.Model(&User{}).Where("name = ?", "u1").Update("age", gorm.Expr("age + ?", 10)).Error)
	var u1 User
	must("first", db.Where("name = ?", "u1").First(&u1).Error)
	check("update by expression", u1.Age, 31)
	updated := db.Model(&u1).Updates(map[string]interface{}{"name": "u1b", "score": 9.5})
	check("updates", updated.RowsAffected, 1)
	must("soft delete", db.Delete(&User{}, u1.ID).Error)
	db.Model(&User{}).Count(&count)
	check("count after soft delete", count, 4)
	db.Unscoped().Model(&User{}).Count(&count)
	check("unscoped count", count, 5)

	email := "u2@x"
	upsert := User{Name: "u2 upserted", Email: &email, Age: 99, Meta: "{}"}
	must("upsert", db.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "email"}},
		DoUpdates: clause.AssignmentColumns([]string{"name", "age"}),
	}).Create(&upsert).Error)
	var u2 User
	must("upserted", db.Where("email = ?", "u2@x").First(&u2).Error)
	check("upsert", fmt.Sprintf("%s/%d", u2.Name, u2.Age), "u2 upserted/99")

	// A nested transaction is a savepoint: rolled back, its writes go and
	// the outer transaction's stay.
	must("transaction", db.Transaction(func(tx *gorm.DB) error {
		must("outer update", tx.Model(&User{}).Where("name = ?", "u0").Update("age", 50).Error)
		inner := tx.Transaction(func(tx2 *gorm.DB) error {
			must("inner update", tx2.Model(&User{}).Where("name = ?", "u3").Update("age", 77).Error)
			nested := "nested@x"
			must("inner create", tx2.Create(&User{Name: "nested", Email: &nested, Meta: "{}"}).Error)
			return errors.New("inner rollback")
		})
		check("inner error", inner, "inner rollback")
		return nil
	}))
	var ages []int
	db.Model(&User{}).Where("name IN ?", []string{"u0", "u3"}).Order("name").Pluck("age", &ages)
	check("nested rollback", ages, []int{50, 23})
	db.Model(&User{}).Where("name = ?", "nested").Count(&count)
	check("nested create gone", count, 0)

	duplicate := "u0@x"
	err = db.Create(&User{Name: "dup", Email: &duplicate, Meta: "{}"}).Error
	check("duplicate refused", err != nil, true)

	type total struct {
		CompanyID uint
		N         int
		S         float64
	}
	var totals []total
	must("group", db.Model(&User{}).Select("company_id, count(*) as n, sum(score) as s").
		Group("company_id").Having("count(*) > ?", 0).Order("company_id").Scan(&totals).Error)
	check("group", totals, []total{{1, 3, 6.75}, {2, 1, 3.25}})
	var inC0 []string
	must("subquery", db.Model(&User{}).Where("company_id IN (?)",
		db.Model(&Company{}).Select("id").Where("name = ?", "c0")).Order("name").Pluck("name", &inC0).Error)
	check("subquery", inC0, []string{"u0", "u2 upserted", "u4"})
	batches := 0
	must("find in batches", db.Model(&User{}).FindInBatches(&[]User{}, 2, func(*gorm.DB, int) error {
		batches++
		return nil
	}).Error)
	check("batches", batches, 2)
	must("append", db.Model(&users[0]).Association("Languages").Append(&langs[2]))
	check("appended", db.Model(&users[0]).Association("Languages").Count(), 2)
	must("delete association", db.Model(&users[0]).Association("Languages").Delete(&langs[0]))
	check("deleted association", db.Model(&users[0]).Association("Languages").Count(), 1)

	type UserWider struct {
		gorm.Model
		Name string `gorm:"size:150;index"`
	}
	must("alter column", db.Table("users").Migrator().AlterColumn(&UserWider{}, "Name"))
	cols, _ = m.ColumnTypes(&User{})
	for _, c := range cols {
		if c.Name() == "name" {
			l, _ := c.Length()
			check("altered length", l, 150)
		}
	}
	must("rename column", m.RenameColumn(&User{}, "age", "years"))
	check("renamed column", m.HasColumn(&User{}, "years"), true)
	must("rename index", m.RenameIndex(&User{}, "idx_users_name", "idx_users_name2"))
	check("renamed index", m.HasIndex(&User{}, "idx_users_name2"), true)
	must("drop index", m.DropIndex(&User{}, "idx_users_name2"))
	must("create index", m.CreateIndex(&User{}, "Name"))
	check("created index", m.HasIndex(&User{}, "idx_users_name"), true)
	must("drop column", m.DropColumn(&User{}, "score"))
	check("dropped column", m.HasColumn(&User{}, "score"), false)
	must("drop table", m.DropTable(&Card{}))
	check("dropped table", m.HasTable(&Card{}), false)
}
