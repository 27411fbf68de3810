# Rails' ORM, ActiveRecord 6.1, over its mysql2 adapter (the mysql2 gem
# 0.5 on libmariadb) against a MySQL-protocol server: what a Rails
# application does. `ActiveRecord::Schema.define` with references,
# foreign keys, unique indexes and timestamps; migrations run up and down
# through a MigrationContext with `schema_migrations` and
# `ar_internal_metadata` (add/rename/change/remove of columns, NULL and
# default changes, indexes, a renamed table); the schema dumped, loaded
# into another database and dumped again; then models with belongs_to,
# has_many and has_many :through, run twice: with the adapter's text
# queries and with `prepared_statements: true` (the binary protocol).
# Every check compares with values the program knows; the first that
# fails stops it with its name. Prints `drivers-ruby: ok` at the end. The
# same program passes against MariaDB 10.11.
#
#     ruby activerecord.rb --host 127.0.0.1 --port 3306 [--log]
#
# Debian's packages: ruby, ruby-activerecord, ruby-mysql2 (.ci/run
# installs them). --log writes every statement to stderr.

require "optparse"
require "bigdecimal"
require "stringio"
require "tmpdir"
require "logger"
require "active_record"
require "mysql2"

opts = { host: "127.0.0.1", port: 3306, log: false }
OptionParser.new do |o|
  o.on("--host H") { |v| opts[:host] = v }
  o.on("--port P", Integer) { |v| opts[:port] = v }
  o.on("--log") { opts[:log] = true }
end.parse!

DB = "drivers_ruby"
COPY = "drivers_ruby_copy"
# `ar_internal_metadata`'s environment, without RAILS_ENV: "default_env".
ENV.delete("RAILS_ENV")
ENV.delete("RACK_ENV")

class CheckFailed < StandardError; end

def check(what, got, want)
  return if got == want && got.class == want.class

  raise CheckFailed, "drivers-ruby: #{what}: got #{got.inspect}, want #{want.inspect}"
end

# Runs the block, which must raise `klass`; the database's error number
# (the mysql2 error under ActiveRecord's) must be `code`.
def fails(what, klass, code)
  yield
rescue klass => e
  check("#{what} (error code)", e.cause.respond_to?(:error_number) ? e.cause.error_number : nil, code)
  e
else
  raise CheckFailed, "drivers-ruby: #{what}: no error, want #{klass} (#{code})"
end

# The statements the block sends (not the adapter's own SCHEMA reads).
def statements
  seen = []
  sub = ActiveSupport::Notifications.subscribe("sql.active_record") do |*, payload|
    seen << payload[:sql] unless payload[:name] == "SCHEMA" || payload[:cached]
  end
  yield
  seen
ensure
  ActiveSupport::Notifications.unsubscribe(sub)
end

$config = {
  adapter: "mysql2", host: opts[:host], port: opts[:port], username: "root", password: "",
  encoding: "utf8mb4", pool: 5
}

def connect(database, **more)
  ActiveRecord::Base.establish_connection($config.merge(database: database, **more))
  ActiveRecord::Base.connection
end

ActiveRecord::Base.logger = Logger.new($stderr) if opts[:log]
ActiveRecord::Base.default_timezone = :utc
ActiveRecord::Migration.verbose = false

# ---- the database --------------------------------------------------------
conn = connect(nil)
conn.drop_database(DB)
conn.drop_database(COPY)
conn.create_database(DB, charset: "utf8mb4", collation: "utf8mb4_general_ci")
check("databases", conn.select_values("SHOW DATABASES LIKE 'drivers\\_ruby'"), [DB])
conn = connect(DB)
check("current_database", conn.current_database, DB)
check("sql_mode is strict", conn.select_value("SELECT @@SESSION.sql_mode").split(",").include?("STRICT_ALL_TABLES"), true)

# ---- Schema.define -------------------------------------------------------
SCHEMA = proc do
  create_table :authors do |t|
    t.string :name, null: false
    t.string :email, null: false, limit: 100
    t.timestamps
    t.index :email, unique: true
  end
  create_table :books do |t|
    t.references :author, null: false, foreign_key: true
    t.string :title, null: false, limit: 100
    t.decimal :price, precision: 10, scale: 2
    t.datetime :published_at, precision: 6
    t.date :released_on
    t.integer :status, null: false, default: 0
    t.integer :lock_version, null: false, default: 0
    t.json :prefs
    t.binary :cover
    t.timestamps
    t.index [:author_id, :title], unique: true
  end
  create_table :tags do |t|
    t.string :name, null: false, limit: 40
    t.index :name, unique: true
  end
  create_table :taggings do |t|
    t.references :book, null: false, foreign_key: { on_delete: :cascade }
    t.references :tag, null: false, foreign_key: true
    t.index [:book_id, :tag_id], unique: true
  end
end
ActiveRecord::Schema.define(version: 2024_01_01_000000, &SCHEMA)

check("tables", conn.tables.sort, %w[ar_internal_metadata authors books schema_migrations taggings tags])
check("table_exists?", [conn.table_exists?(:books), conn.table_exists?(:nope)], [true, false])
check("schema_migrations", ActiveRecord::SchemaMigration.all_versions, ["20240101000000"])
check("ar_internal_metadata", ActiveRecord::InternalMetadata[:environment], "default_env")
check("primary keys", %w[books schema_migrations ar_internal_metadata].map { |t| conn.primary_key(t) },
      %w[id version key])

def describe_columns(conn, table)
  conn.columns(table).map { |c| [c.name, c.sql_type, c.null, c.default] }
end

def describe_indexes(conn, table)
  conn.indexes(table).map { |i| [i.name, i.columns, i.unique] }.sort
end

def describe_foreign_keys(conn, table)
  conn.foreign_keys(table).map { |f| [f.name, f.column, f.to_table, f.primary_key, f.on_delete] }.sort
end

BOOK_COLUMNS = [
  ["id", "bigint(20)", false, nil],
  ["author_id", "bigint(20)", false, nil],
  ["title", "varchar(100)", false, nil],
  ["price", "decimal(10,2)", true, nil],
  ["published_at", "datetime(6)", true, nil],
  ["released_on", "date", true, nil],
  ["status", "int(11)", false, "0"],
  ["lock_version", "int(11)", false, "0"],
  # MariaDB's JSON: LONGTEXT with a json_valid check (so is Skarv's).
  ["prefs", "longtext", true, nil],
  ["cover", "blob", true, nil],
  ["created_at", "datetime(6)", false, nil],
  ["updated_at", "datetime(6)", false, nil]
].freeze
BOOK_INDEXES = [
  ["index_books_on_author_id", ["author_id"], false],
  ["index_books_on_author_id_and_title", %w[author_id title], true]
].freeze
# ActiveRecord's foreign key names: fk_rails_ and 10 hex digits of
# SHA-256("<table>_<column>_fk").
FK_BOOKS_AUTHOR = "fk_rails_53d51ce16a"
FK_TAGGINGS_BOOK = "fk_rails_8b0f6ed9ed"
FK_TAGGINGS_TAG = "fk_rails_9fcd2e236b"
FK_NOTES_BOOK = "fk_rails_317dc639a3"

check("columns of books", describe_columns(conn, :books), BOOK_COLUMNS)
check("columns of authors", describe_columns(conn, :authors), [
  ["id", "bigint(20)", false, nil],
  ["name", "varchar(255)", false, nil],
  ["email", "varchar(100)", false, nil],
  ["created_at", "datetime(6)", false, nil],
  ["updated_at", "datetime(6)", false, nil]
])
check("indexes of books", describe_indexes(conn, :books), BOOK_INDEXES)
check("indexes of authors", describe_indexes(conn, :authors), [["index_authors_on_email", ["email"], true]])
check("indexes of taggings", describe_indexes(conn, :taggings), [
  ["index_taggings_on_book_id", ["book_id"], false],
  ["index_taggings_on_book_id_and_tag_id", %w[book_id tag_id], true],
  ["index_taggings_on_tag_id", ["tag_id"], false]
])
check("foreign keys of books", describe_foreign_keys(conn, :books),
      [[FK_BOOKS_AUTHOR, "author_id", "authors", "id", nil]])
check("foreign keys of taggings", describe_foreign_keys(conn, :taggings), [
  [FK_TAGGINGS_TAG, "tag_id", "tags", "id", nil],
  [FK_TAGGINGS_BOOK, "book_id", "books", "id", :cascade]
].sort)
check("column_exists?", [conn.column_exists?(:books, :price, :decimal, precision: 10, scale: 2),
                         conn.column_exists?(:books, :rating)], [true, false])
check("index_exists?", conn.index_exists?(:books, [:author_id, :title], unique: true), true)

def dump(conn)
  io = StringIO.new
  ActiveRecord::SchemaDumper.dump(conn, io)
  io.string
end

first_dump = dump(conn)
[
  "ActiveRecord::Schema.define(version: 2024_01_01_000000) do",
  'create_table "authors",',
  'create_table "books",',
  'create_table "tags",',
  'create_table "taggings",',
  't.bigint "author_id", null: false',
  't.string "title", limit: 100, null: false',
  't.decimal "price", precision: 10, scale: 2',
  't.datetime "published_at", precision: 6',
  't.date "released_on"',
  't.integer "status", default: 0, null: false',
  't.binary "cover"',
  't.datetime "created_at", precision: 6, null: false',
  't.index ["author_id", "title"], name: "index_books_on_author_id_and_title", unique: true',
  't.index ["email"], name: "index_authors_on_email", unique: true',
  'add_foreign_key "books", "authors"',
  'add_foreign_key "taggings", "books", on_delete: :cascade',
  'add_foreign_key "taggings", "tags"'
].each { |line| check("schema dump has #{line}", first_dump.include?(line), true) }
# The JSON column's json_valid check, as information_schema.CHECK_CONSTRAINTS
# gives it. ActiveRecord takes off the first and last characters of a
# MySQL server's CHECK_CLAUSE (MySQL 8 prints `(cond)`), not of MariaDB's
# (`cond`); Skarv says MySQL 8.0.36 and prints `(cond)` (docs/sql.md).
JSON_CHECK = 't.check_constraint "json_valid(`prefs`)", name: "prefs"'
check("check_constraints", conn.check_constraints(:books).map { |c| [c.name, c.expression] },
      [["prefs", "json_valid(`prefs`)"]])
check("schema dump has #{JSON_CHECK}", first_dump.include?(JSON_CHECK), true)

# ---- migrations up and down ----------------------------------------------
MIGRATIONS = {
  "20240102000000_add_rating_to_books.rb" => <<~RUBY,
    class AddRatingToBooks < ActiveRecord::Migration[6.1]
      def change
        add_column :books, :rating, :integer, default: 0, null: false
        add_column :books, :blurb, :text
        add_index :books, :rating
        add_column :authors, :nick, :string, limit: 30
        create_table :notes do |t|
          t.references :book, foreign_key: true
          t.text :body
          t.timestamps
        end
      end
    end
  RUBY
  "20240103000000_reshape_books.rb" => <<~RUBY
    class ReshapeBooks < ActiveRecord::Migration[6.1]
      def up
        rename_column :authors, :nick, :handle
        change_column :books, :title, :string, limit: 200, null: false
        change_column_null :books, :price, false, 0
        change_column_default :books, :status, from: 0, to: 1
        remove_index :books, :rating
        remove_column :books, :blurb
        rename_table :notes, :remarks
      end

      def down
        rename_table :remarks, :notes
        add_column :books, :blurb, :text, after: :rating
        add_index :books, :rating
        change_column_default :books, :status, from: 1, to: 0
        change_column_null :books, :price, true
        change_column :books, :title, :string, limit: 100, null: false
        rename_column :authors, :handle, :nick
      end
    end
  RUBY
}.freeze

# A model that reads the migrations' tables (columns read afresh).
class Remark < ActiveRecord::Base; end

migrations_dir = Dir.mktmpdir("drivers-ruby")
MIGRATIONS.each { |name, text| File.write(File.join(migrations_dir, name), text) }
context = ActiveRecord::MigrationContext.new(migrations_dir, ActiveRecord::SchemaMigration)
check("needs_migration? before", context.needs_migration?, true)
check("current_version before", context.current_version, 2024_01_01_000000)
context.migrate
check("needs_migration? after", context.needs_migration?, false)
check("current_version after", context.current_version, 2024_01_03_000000)
check("schema_migrations after migrate", ActiveRecord::SchemaMigration.all_versions,
      %w[20240101000000 20240102000000 20240103000000])
# (The version Schema.define recorded has no file here.)
check("migrations_status", context.migrations_status, [
  ["up", "20240101000000", "********** NO FILE **********"],
  ["up", "20240102000000", "Add rating to books"], ["up", "20240103000000", "Reshape books"]
])
FINAL_BOOK_COLUMNS = BOOK_COLUMNS.map do |c|
  case c[0]
  when "title" then ["title", "varchar(200)", false, nil]
  when "price" then ["price", "decimal(10,2)", false, nil]
  when "status" then ["status", "int(11)", false, "1"]
  else c
  end
end + [["rating", "int(11)", false, "0"]]
check("columns of books after migrate", describe_columns(conn, :books), FINAL_BOOK_COLUMNS)
check("indexes of books after migrate", describe_indexes(conn, :books), BOOK_INDEXES)
check("columns of authors after migrate", describe_columns(conn, :authors).map(&:first),
      %w[id name email created_at updated_at handle])
check("authors.handle", describe_columns(conn, :authors).last, ["handle", "varchar(30)", true, nil])
check("tables after migrate", conn.tables.sort,
      %w[ar_internal_metadata authors books remarks schema_migrations taggings tags])
# rename_table renames the table's indexes after it (RENAME INDEX).
check("indexes of remarks", describe_indexes(conn, :remarks), [["index_remarks_on_book_id", ["book_id"], false]])
check("foreign keys of remarks", describe_foreign_keys(conn, :remarks), [[FK_NOTES_BOOK, "book_id", "books", "id", nil]])
check("remarks columns", Remark.column_names, %w[id book_id body created_at updated_at])

# Down to the second version, then back one more step: the schema is as
# it was.
context.down(2024_01_02_000000)
check("current_version after down", context.current_version, 2024_01_02_000000)
check("books after down", describe_columns(conn, :books).map(&:first),
      BOOK_COLUMNS.map(&:first) + %w[rating blurb])
check("books.title after down", describe_columns(conn, :books)[2], ["title", "varchar(100)", false, nil])
check("notes is back", conn.tables.sort, %w[ar_internal_metadata authors books notes schema_migrations taggings tags])
check("indexes of notes", describe_indexes(conn, :notes), [["index_notes_on_book_id", ["book_id"], false]])
context.rollback
check("schema_migrations after rollback", ActiveRecord::SchemaMigration.all_versions, ["20240101000000"])
check("schema dump after rollback", dump(conn), first_dump)
context.migrate
check("current_version after migrating again", context.current_version, 2024_01_03_000000)

# The dumped schema loads into another database, which dumps the same.
final_dump = dump(conn)
check("final schema dump has remarks", final_dump.include?('create_table "remarks",'), true)
check("final schema dump has the new title", final_dump.include?('t.string "title", limit: 200, null: false'), true)
check("final schema dump has status' default", final_dump.include?('t.integer "status", default: 1, null: false'), true)
conn.create_database(COPY, charset: "utf8mb4", collation: "utf8mb4_general_ci")
copy = connect(COPY)
loadable = final_dump
eval(loadable, TOPLEVEL_BINDING) # rubocop:disable Security/Eval
check("schema_migrations of the loaded schema", ActiveRecord::SchemaMigration.all_versions, ["20240103000000"])
check("the loaded schema dumps the same", dump(copy), loadable)
copy.drop_database(COPY)

# ---- models --------------------------------------------------------------
class Author < ActiveRecord::Base
  has_many :books, dependent: :destroy
  has_many :tags, -> { distinct }, through: :books
  validates :name, presence: true
  validates :email, uniqueness: true
end

class Book < ActiveRecord::Base
  belongs_to :author
  has_many :taggings, dependent: :destroy
  has_many :tags, through: :taggings
  enum status: { draft: 0, published: 1, archived: 2 }
  # The column is LONGTEXT (MariaDB's JSON): the attribute says JSON.
  attribute :prefs, :json
  validates :title, presence: true
end

class Tag < ActiveRecord::Base
  has_many :taggings
  has_many :books, through: :taggings
end

class Tagging < ActiveRecord::Base
  belongs_to :book
  belongs_to :tag
end

MODELS = [Author, Book, Tag, Tagging, Remark].freeze

def prepared_count(conn)
  conn.select_rows("SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").first.last.to_i
end

def orm_checks(how, prepared)
  conn = connect(DB, prepared_statements: prepared)
  MODELS.each(&:reset_column_information)
  check("#{how}: prepared_statements", conn.prepared_statements, prepared)
  # Empty tables, numbered from 1 again (TRUNCATE with the foreign key
  # checks off, as Rails' test fixtures do).
  conn.truncate_tables("taggings", "remarks", "books", "tags", "authors")
  check("#{how}: truncated", [Author.count, Book.count], [0, 0])
  prepares = prepared_count(conn)

  # create! with associations.
  ann = Author.create!(name: "Ann", email: "ann@example.com")
  bob = Author.create!(name: "Bob", email: "bob@example.com")
  check("#{how}: create! ids", [ann.id, bob.id], [1, 2])
  check("#{how}: timestamps read back", [Author.find(1).created_at, Author.find(1).updated_at],
        [ann.created_at, ann.created_at])
  at = Time.utc(2024, 2, 29, 10, 11, Rational(12_345_678, 1_000_000))
  cover = ((0..255).map(&:chr).join * 40).b
  b1 = ann.books.create!(title: "Rust", price: BigDecimal("19.99"), published_at: at,
                         released_on: Date.new(2024, 3, 1), status: :published,
                         prefs: { "lang" => "en", "sizes" => [1, 2], "hard" => true }, cover: cover)
  b2 = ann.books.create!(title: "Ruby", price: BigDecimal("5.50"), status: :draft)
  b3 = bob.books.create!(title: "Rails", price: BigDecimal("42.00"), status: :published,
                         prefs: { "lang" => "de" })
  b4 = bob.books.create!(title: "Racket", price: BigDecimal("0.01"), status: :archived)
  check("#{how}: book ids", [b1, b2, b3, b4].map(&:id), [1, 2, 3, 4])
  check("#{how}: defaults read back", [b2.reload.rating, b2.lock_version], [0, 0])

  # Values read back.
  r = Book.find(b1.id)
  check("#{how}: decimal", r.price, BigDecimal("19.99"))
  check("#{how}: datetime(6)", [r.published_at, r.published_at.usec], [at, 345_678])
  check("#{how}: date", r.released_on, Date.new(2024, 3, 1))
  check("#{how}: json as a Hash", r.prefs, { "lang" => "en", "sizes" => [1, 2], "hard" => true })
  check("#{how}: blob", [r.cover, r.cover.encoding], [cover, Encoding::BINARY])
  check("#{how}: enum", [r.status, r.published?, Book.find(b2.id).draft?], ["published", true, true])
  check("#{how}: enum stored as its integer",
        conn.select_value("SELECT status FROM books WHERE id = #{b4.id}"), 2)
  check("#{how}: datetime as the server prints it",
        conn.select_value("SELECT CAST(published_at AS CHAR) FROM books WHERE id = 1"),
        "2024-02-29 10:11:12.345678")
  check("#{how}: json on the server",
        conn.select_value("SELECT JSON_UNQUOTE(JSON_EXTRACT(prefs, '$.lang')) FROM books WHERE id = 3"), "de")
  check("#{how}: blob length on the server", conn.select_value("SELECT LENGTH(cover) FROM books WHERE id = 1"), 10_240)
  check("#{how}: json where", Book.where("JSON_EXTRACT(prefs, '$.sizes[1]') = ?", 2).pluck(:title), ["Rust"])

  # find_by, where chains, order, limit, aggregates.
  check("#{how}: find_by", Author.find_by(email: "bob@example.com")&.name, "Bob")
  check("#{how}: find_by nothing", Author.find_by(email: "nobody@example.com"), nil)
  fails("#{how}: find_by! nothing", ActiveRecord::RecordNotFound, nil) { Author.find_by!(email: "nobody") }
  check("#{how}: where chain",
        Book.where(author: ann).where("price > ?", 1).where.not(status: :archived).order(:title).pluck(:title),
        %w[Ruby Rust])
  check("#{how}: where or", Book.where(price: ..BigDecimal("1")).or(Book.where(title: "Rails")).order(id: :desc).pluck(:id), [4, 3])
  check("#{how}: where range", Book.where(price: BigDecimal("5")..BigDecimal("20")).order(:price).pluck(:title), %w[Ruby Rust])
  check("#{how}: where IN", Book.where(id: [1, 3, 99]).order(:id).ids, [1, 3])
  check("#{how}: LIKE", Book.where("title LIKE ?", "Ra%").order(:title).pluck(:title), %w[Racket Rails])
  check("#{how}: subquery", Book.where(author_id: Author.where(name: "Bob").select(:id)).count, 2)
  check("#{how}: limit offset", Book.order(price: :desc).limit(2).offset(1).pluck(:title), %w[Rust Ruby])
  check("#{how}: first last", [Book.first.title, Book.last.title, Book.order(:title).first.title], %w[Rust Racket Racket])
  check("#{how}: exists?", [Book.exists?(title: "Ruby"), Book.exists?(title: "Perl")], [true, false])
  check("#{how}: count sum", [Book.count, Book.sum(:price)], [4, BigDecimal("67.50")])
  check("#{how}: minimum maximum", [Book.minimum(:price), Book.maximum(:title)], [BigDecimal("0.01"), "Rust"])
  check("#{how}: average", Book.where(author: bob).average(:price), BigDecimal("21.005"))
  check("#{how}: group count", Book.group(:author_id).order(:author_id).count, { 1 => 2, 2 => 2 })
  check("#{how}: group enum", Book.group(:status).count, { "draft" => 1, "published" => 2, "archived" => 1 })
  check("#{how}: group sum having", Book.group(:author_id).having("SUM(price) > ?", 30).sum(:price), { 2 => BigDecimal("42.01") })
  check("#{how}: pluck", Book.order(:id).pluck(:id, :title, :status),
        [[1, "Rust", "published"], [2, "Ruby", "draft"], [3, "Rails", "published"], [4, "Racket", "archived"]])
  check("#{how}: select alias", Book.select("title, price * 2 AS twice").where(id: 2).map { |b| [b.title, b.twice] },
        [["Ruby", BigDecimal("11.00")]])
  check("#{how}: enum scope", [Book.published.count, Book.not_published.order(:id).ids], [2, [2, 4]])

  # joins, and the three ways of loading associations.
  check("#{how}: joins", Author.joins(:books).where(books: { status: :published }).distinct.order(:name).pluck(:name), %w[Ann Bob])
  check("#{how}: joins group", Author.joins(:books).group("authors.name").order("authors.name").sum("books.price"),
        { "Ann" => BigDecimal("25.49"), "Bob" => BigDecimal("42.01") })
  check("#{how}: left_outer_joins", Author.left_outer_joins(:books).where(books: { id: nil }).count, 0)
  loaded = nil
  sqls = statements { loaded = Author.preload(:books).order(:id).to_a }
  check("#{how}: preload statements", sqls.size, 2)
  titles = nil
  sqls = statements { titles = loaded.map { |a| a.books.map(&:title).sort } }
  check("#{how}: preloaded", [titles, sqls.size], [[%w[Ruby Rust], %w[Racket Rails]], 0])
  sqls = statements { loaded = Author.eager_load(:books).order("authors.id, books.id").to_a }
  check("#{how}: eager_load is one statement", [sqls.size, sqls.first.include?("LEFT OUTER JOIN")], [1, true])
  check("#{how}: eager_loaded", loaded.map { |a| [a.name, a.books.map(&:id)] }, [["Ann", [1, 2]], ["Bob", [3, 4]]])
  sqls = statements do
    loaded = Author.includes(:books).where(books: { status: :published }).order("authors.id").to_a
  end
  check("#{how}: includes with a condition on books", [sqls.size, loaded.map { |a| a.books.map(&:title) }],
        [1, [["Rust"], ["Rails"]]])
  sqls = statements { loaded = Book.includes(:author).order(:id).to_a }
  check("#{how}: includes", [sqls.size, loaded.map { |b| b.author.name }], [2, %w[Ann Ann Bob Bob]])

  # has_many :through.
  ruby = Tag.create!(name: "ruby")
  web = Tag.create!(name: "web")
  b2.tags << ruby
  b3.tags << ruby
  b3.tags << web
  check("#{how}: has_many through", Book.find(3).tags.order(:name).pluck(:name), %w[ruby web])
  check("#{how}: through, the other way", ruby.books.order(:id).pluck(:title), %w[Ruby Rails])
  check("#{how}: through two steps", bob.tags.order(:name).pluck(:name), %w[ruby web])
  check("#{how}: joins through", Author.joins(books: :tags).where(tags: { name: "ruby" }).distinct.order(:id).pluck(:name), %w[Ann Bob])
  sqls = statements { loaded = Book.includes(:tags).order(:id).to_a }
  check("#{how}: includes through", [sqls.size, loaded.map { |b| b.tags.map(&:name).sort }],
        [3, [[], ["ruby"], %w[ruby web], []]])
  fails("#{how}: duplicate tagging", ActiveRecord::RecordNotUnique, 1062) { Tagging.create!(book: b3, tag: web) }

  # find_each and in_batches.
  Book.insert_all((5..11).map { |i| { author_id: 2, title: "Batch #{i}", price: 1, status: 0, created_at: at, updated_at: at } })
  check("#{how}: insert_all", Book.where("title LIKE 'Batch%'").count, 7)
  seen = []
  Book.find_each(batch_size: 3) { |b| seen << b.id }
  check("#{how}: find_each", seen, (1..11).to_a)
  sizes = []
  Book.where(author_id: 2).find_in_batches(batch_size: 4) { |batch| sizes << batch.map(&:id) }
  check("#{how}: find_in_batches", sizes, [[3, 4, 5, 6], [7, 8, 9, 10], [11]])
  check("#{how}: in_batches update_all", Book.where("title LIKE 'Batch%'").in_batches(of: 3).update_all(rating: 7), 7)
  check("#{how}: after in_batches", Book.where(rating: 7).count, 7)
  check("#{how}: update_all", Book.where("title LIKE 'Batch%'").where("id > ?", 8).update_all(status: 2), 3)
  check("#{how}: delete_all", Book.where("title LIKE 'Batch%'").delete_all, 7)
  check("#{how}: after delete_all", Book.count, 4)

  # Validations, and the database's own errors (after the batches: a
  # failed INSERT may use up an auto-increment value).
  dup = Author.new(name: "Ann 2", email: "ann@example.com")
  check("#{how}: uniqueness validation", [dup.valid?, dup.errors[:email]], [false, ["has already been taken"]])
  fails("#{how}: RecordNotUnique", ActiveRecord::RecordNotUnique, 1062) { dup.save!(validate: false) }
  fails("#{how}: InvalidForeignKey on insert", ActiveRecord::InvalidForeignKey, 1452) do
    Book.new(author_id: 999, title: "Ghost", price: 1).save!(validate: false)
  end
  fails("#{how}: InvalidForeignKey on delete", ActiveRecord::InvalidForeignKey, 1451) { ann.delete }
  fails("#{how}: ValueTooLong", ActiveRecord::ValueTooLong, 1406) do
    Author.create!(name: "x" * 256, email: "long@example.com")
  end
  fails("#{how}: RangeError", ActiveRecord::RangeError, 1264) do
    Book.where(id: b4.id).update_all(price: BigDecimal("123456789.00"))
  end
  fails("#{how}: NotNullViolation", ActiveRecord::NotNullViolation, 1048) do
    Book.where(id: b4.id).update_all(title: nil)
  end
  check("#{how}: nothing written by the failures", [Author.count, Book.count, Book.find(b4.id).title], [2, 4, "Racket"])

  # insert_all skips duplicates; upsert_all updates them.
  Tag.insert_all([{ name: "ruby" }, { name: "db" }])
  check("#{how}: insert_all skips a duplicate", Tag.order(:name).pluck(:name), %w[db ruby web])
  Author.upsert_all([
    { name: "Ann Lee", email: "ann@example.com", created_at: at, updated_at: at },
    { name: "Cy", email: "cy@example.com", created_at: at, updated_at: at }
  ])
  check("#{how}: upsert_all", Author.order(:email).pluck(:email, :name),
        [["ann@example.com", "Ann Lee"], ["bob@example.com", "Bob"], ["cy@example.com", "Cy"]])
  check("#{how}: upsert_all kept the id", Author.find_by(email: "ann@example.com").id, 1)
  fails("#{how}: insert_all! of a duplicate", ActiveRecord::RecordNotUnique, 1062) do
    Tag.insert_all!([{ name: "web" }])
  end

  # Updates, optimistic locking.
  one = Book.find(2)
  two = Book.find(2)
  one.update!(title: "Ruby 2", price: BigDecimal("6.00"))
  check("#{how}: lock_version", [one.lock_version, Book.find(2).lock_version], [1, 1])
  two.title = "Ruby II"
  fails("#{how}: StaleObjectError", ActiveRecord::StaleObjectError, nil) { two.save! }
  check("#{how}: stale write left out", Book.find(2).title, "Ruby 2")
  stored = Book.find(2)
  check("#{how}: updated_at moved", [stored.updated_at > stored.created_at, stored.updated_at], [true, one.updated_at])
  one.increment!(:rating)
  check("#{how}: increment!", Book.find(2).rating, 1)
  Book.find(2).published!
  check("#{how}: enum bang", Book.find(2).status, "published")

  # Transactions: a nested one with requires_new (a savepoint) rolled
  # back, a failed INSERT in a savepoint, create_or_find_by.
  Author.transaction do
    Author.create!(name: "Outer", email: "outer@example.com")
    Author.transaction(requires_new: true) do
      Author.create!(name: "Inner", email: "inner@example.com")
      raise ActiveRecord::Rollback
    end
    begin
      Author.transaction(requires_new: true) do
        Author.create!(name: "Also inner", email: "inner2@example.com")
        Author.new(name: "Dup", email: "outer@example.com").save!(validate: false)
      end
    rescue ActiveRecord::RecordNotUnique
      nil
    end
    # (It INSERTs in a savepoint and, on 1062, reads the row there.)
    found = Tag.create_or_find_by!(name: "web")
    check("#{how}: create_or_find_by! found", [found.id, found.name], [2, "web"])
    made = Tag.create_or_find_by!(name: "sql")
    check("#{how}: create_or_find_by! made", [made.persisted?, made.name], [true, "sql"])
  end
  check("#{how}: savepoints", Author.where("email LIKE 'outer%' OR email LIKE 'inner%'").order(:email).pluck(:email),
        %w[outer@example.com])
  check("#{how}: the transaction's tags", Tag.order(:name).pluck(:name), %w[db ruby sql web])
  Author.transaction do
    Author.create!(name: "Gone", email: "gone@example.com")
    raise ActiveRecord::Rollback
  end
  check("#{how}: rollback", Author.exists?(email: "gone@example.com"), false)
  begin
    Book.transaction do
      Book.where(id: 1).update_all(price: BigDecimal("1.00"))
      raise "boom"
    end
  rescue RuntimeError
    nil
  end
  check("#{how}: rollback on an exception", Book.find(1).price, BigDecimal("19.99"))

  # Pessimistic locking: FOR UPDATE, and another connection that reads
  # the locked row, locks another, skips the locked one (`SKIP LOCKED`)
  # or fails at once on it (`NOWAIT`), and times out waiting for it.
  Book.transaction do
    locked = nil
    sqls = statements { locked = Book.lock.find(1) }
    check("#{how}: lock", [locked.title, sqls.grep(/^SELECT/).map { |q| q.end_with?("FOR UPDATE") }], ["Rust", [true]])
    other = Thread.new do
      ActiveRecord::Base.connection_pool.with_connection do |c|
        c.execute("SET SESSION innodb_lock_wait_timeout = 1")
        # Without the BLOB and TEXT columns: Skarv, as NDB, reads those
        # with a shared lock, which waits (docs/transactions.md).
        read = Book.select(:id, :title).find(1).title
        another = Book.transaction { Book.lock.where(id: 2).pluck(:title) }
        skipped = Book.transaction { Book.lock("FOR UPDATE SKIP LOCKED").where(id: [1, 2]).order(:id).pluck(:id) }
        refused = begin
          Book.transaction { Book.lock("FOR UPDATE NOWAIT").select(:id).find(1) }
          nil
        rescue ActiveRecord::LockWaitTimeout => e
          e.cause.error_number
        end
        timed_out = begin
          Book.transaction { Book.lock.find(1) }
          nil
        rescue ActiveRecord::LockWaitTimeout => e
          e.cause.error_number
        end
        [read, another, skipped, refused, timed_out]
      end
    end.value
    check("#{how}: a locked row, from another connection", other, ["Rust", ["Ruby 2"], [2], 1205, 1205])
    locked.with_lock { locked.update!(rating: 5) }
  end
  check("#{how}: with_lock", Book.find(1).rating, 5)

  # Schema reads, raw SQL.
  check("#{how}: columns", describe_columns(conn, :books), FINAL_BOOK_COLUMNS)
  check("#{how}: indexes", describe_indexes(conn, :books), BOOK_INDEXES)
  check("#{how}: foreign_keys", describe_foreign_keys(conn, :books), [[FK_BOOKS_AUTHOR, "author_id", "authors", "id", nil]])
  check("#{how}: primary_key", conn.primary_key("books"), "id")
  result = conn.select_all(Book.sanitize_sql_array(["SELECT id, title, price FROM books WHERE price > ? ORDER BY id", 5]))
  check("#{how}: select_all", [result.columns, result.rows],
        [%w[id title price], [[1, "Rust", BigDecimal("19.99")], [2, "Ruby 2", BigDecimal("6.00")], [3, "Rails", BigDecimal("42.00")]]])
  check("#{how}: select_all to_a", conn.select_all("SELECT 1 AS one, 'two' AS two").to_a, [{ "one" => 1, "two" => "two" }])
  check("#{how}: select_rows", conn.select_rows("SELECT name FROM tags ORDER BY name"), [["db"], ["ruby"], ["sql"], ["web"]])
  check("#{how}: find_by_sql", Book.find_by_sql(["SELECT * FROM books WHERE title = ?", "Rails"]).map(&:id), [3])
  if prepared
    # Binds of its own: a statement prepared on the server.
    bind = ActiveRecord::Relation::QueryAttribute.new("id", 4, ActiveRecord::Type::Integer.new)
    check("#{how}: exec_query with binds", conn.exec_query("SELECT title FROM books WHERE id = ?", "SQL", [bind]).rows,
          [["Racket"]])
  end

  # dependent: :destroy through the associations.
  Author.find(2).destroy
  check("#{how}: dependent destroy", [Book.where(author_id: 2).count, Tagging.count], [0, 1])

  # The text protocol or the binary one, as asked.
  prepared_now = prepared_count(conn) - prepares
  check("#{how}: statements prepared on the server", prepared_now.positive?, prepared)
end

orm_checks("text", false)
orm_checks("prepared", true)

conn = connect(nil)
conn.drop_database(DB)
puts "drivers-ruby: ok"
