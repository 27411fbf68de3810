// TypeORM 0.3 and knex 3, both over Node's mysql2, against a
// MySQL-protocol server.
//
// TypeORM (its `mysql` driver, but where said): synchronize, with the
// schema it makes read back from information_schema (columns, indexes,
// foreign keys) and `getTable`; repositories (a cascading save with
// one-to-many and many-to-many relations, find with relations, the find
// operators, select/skip/take, exists, sum, increment, soft delete and
// restore); the query builder (left and inner joins, GROUP BY/HAVING, a
// subquery, paging over a join, INSERT IGNORE, bulk UPDATE and DELETE);
// transactions (a commit, a rollback on a 1062, an isolation level,
// SELECT … FOR UPDATE, a savepoint rolled back after writes); upsert; the
// version column and an optimistic lock; ON DELETE CASCADE; what a second
// synchronize finds, then one of changed entities (DROP/ADD COLUMN, a
// changed default, an index) and nothing left after it; migrations with
// the `migrations` table, run and undone.
//
// knex: the schema builder (createTable with an unsigned foreign key
// ON DELETE CASCADE, UNIQUE and plain indexes, a composite primary key;
// alterTable with renameColumn, alter(), dropUnique, dropColumn, a
// foreign key added and dropped; renameTable; a view), hasTable,
// hasColumn and columnInfo; inserts with their generated ids; joins, a
// CTE, UNION, ROW_NUMBER() OVER, whereExists, a JSON path,
// GROUP BY/HAVING; update and delete counts; onConflict().merge() and
// ignore(); batchInsert; transactions (a commit, a rollback, a nested one
// rolled back to its savepoint after writes, forUpdate); raw queries with
// positional, named and identifier bindings; error codes (1062, 1452,
// 1064, 1146); migrations with the `knex_migrations` tables.
//
// Every check compares with values the program knows; the first that
// fails stops it with its name (exit status 1). Prints
// `drivers-typeorm-knex: ok` at the end. The same program passes against
// MariaDB 10.11. It drops and creates the databases `drivers_typeorm`
// and `drivers_knex`.
//
//     node typeorm_knex.js --host 127.0.0.1 --port 3306
//
// Its packages are pinned by package-lock.json (`npm ci`; .ci/run runs it).

'use strict';
require('reflect-metadata');
const assert = require('node:assert/strict');
const mysql = require('mysql2/promise');
const {
  DataSource,
  EntitySchema,
  Table,
  TableColumn,
  TableIndex,
  In,
  Like,
  Between,
  IsNull,
  Not,
  MoreThan,
} = require('typeorm');
const knexFactory = require('knex');

const { host, port } = require('./server');
const TDB = 'drivers_typeorm';
const KDB = 'drivers_knex';

let checks = 0;
function check(what, got, want) {
  checks += 1;
  try {
    assert.deepStrictEqual(got, want);
  } catch (e) {
    throw new Error(`drivers-typeorm-knex: ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

// Awaits `promise`, which must fail; `test(error)` must hold.
async function fails(what, promise, test) {
  checks += 1;
  let error;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  if (error === undefined) throw new Error(`drivers-typeorm-knex: ${what}: succeeded, want an error`);
  if (!test(error)) {
    throw new Error(
      `drivers-typeorm-knex: ${what}: wrong error: ${error.name} errno=${error.errno} ${error.message}`
    );
  }
}

// Whether the server is Skarv (its version says so): its
// information_schema gives MySQL 8's forms where MariaDB's differ.
let skarv = false;

async function freshDatabase(name) {
  const conn = await mysql.createConnection({ host, port, user: 'root' });
  skarv = (await conn.query('SELECT VERSION() AS v'))[0][0].v.includes('Skarv');
  await conn.query(`DROP DATABASE IF EXISTS ${name}`);
  await conn.query(`CREATE DATABASE ${name}`);
  await conn.end();
}

// Columns of a table as information_schema gives them.
async function columns(query, db, table) {
  const rows = await query(
    'SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, IS_NULLABLE AS nullable, EXTRA AS extra ' +
      'FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION',
    [db, table]
  );
  return rows.map((r) => [r.name, r.type, r.nullable, r.extra]);
}

// ---------------------------------------------------------------- TypeORM

function entities(changed) {
  const authorColumns = {
    id: { type: Number, primary: true, generated: true },
    name: { type: 'varchar', length: 100, unique: true },
    bio: { type: 'text', nullable: true },
    meta: { type: 'json', nullable: true },
    rating: { type: 'decimal', precision: 6, scale: 2, default: 0 },
    born: { type: 'date', nullable: true },
    created: { type: 'datetime', createDate: true },
    updated: { type: 'datetime', updateDate: true },
    version: { type: 'int', version: true },
    kind: { type: 'enum', enum: ['a', 'b'], default: 'a' },
    active: { type: 'boolean', default: true },
  };
  const authorIndices = [{ name: 'IDX_author_rating', columns: ['rating'] }];
  if (changed) {
    // The second synchronize: a column dropped, two added (one dropped
    // and one added of the same count TypeORM would take for a rename), a
    // default changed, one more index.
    delete authorColumns.bio;
    authorColumns.nick = { type: 'varchar', length: 50, nullable: true };
    authorColumns.score = { type: 'int', default: 0 };
    authorColumns.rating = { type: 'decimal', precision: 6, scale: 2, default: 1 };
    authorIndices.push({ name: 'IDX_author_kind_born', columns: ['kind', 'born'] });
  }
  const Author = new EntitySchema({
    name: 'Author',
    tableName: 'author',
    columns: authorColumns,
    relations: {
      books: { type: 'one-to-many', target: 'Book', inverseSide: 'author', cascade: ['insert'] },
    },
    indices: authorIndices,
  });
  const Book = new EntitySchema({
    name: 'Book',
    tableName: 'book',
    columns: {
      id: { type: 'int', primary: true, generated: 'increment' },
      title: { type: 'varchar', length: 200 },
      pages: { type: 'int', default: 0 },
      removed: { type: 'datetime', deleteDate: true, nullable: true },
    },
    relations: {
      author: {
        type: 'many-to-one',
        target: 'Author',
        joinColumn: { name: 'author_id' },
        onDelete: 'CASCADE',
        nullable: false,
      },
      tags: { type: 'many-to-many', target: 'Tag', joinTable: { name: 'book_tag' }, cascade: ['insert'] },
    },
  });
  const Tag = new EntitySchema({
    name: 'Tag',
    tableName: 'tag',
    columns: { id: { type: 'int', primary: true, generated: 'increment' }, label: { type: 'varchar', length: 20 } },
  });
  return [Author, Book, Tag];
}

function dataSource(type, extra) {
  return new DataSource({
    type,
    host,
    port,
    username: 'root',
    password: '',
    database: TDB,
    logging: false,
    ...extra,
  });
}

// Tree entities: a closure table (its own table of ancestor/descendant
// pairs) and a nested set (left/right numbers renumbered by UPDATEs).
async function trees() {
  const treeEntity = (name, type) =>
    new EntitySchema({
      name,
      tableName: name.toLowerCase(),
      trees: [{ type }],
      columns: { id: { type: 'int', primary: true, generated: true }, name: { type: 'varchar', length: 20 } },
      relations: {
        parent: { type: 'many-to-one', target: name, treeParent: true },
        children: { type: 'one-to-many', target: name, treeChildren: true, inverseSide: 'parent' },
      },
    });
  const ds = dataSource('mysql', {
    entities: [treeEntity('Closure', 'closure-table'), treeEntity('NestedSet', 'nested-set')],
    synchronize: true,
  });
  await ds.initialize();
  const shape = (n) => [n.name, (n.children || []).map(shape).sort()];
  for (const entity of ['Closure', 'NestedSet']) {
    const tree = ds.getTreeRepository(entity);
    const a = await tree.save({ name: 'a' });
    const b = await tree.save({ name: 'b', parent: a });
    await tree.save({ name: 'c', parent: b });
    const d = await tree.save({ name: 'd', parent: a });
    await tree.save({ name: 'e', parent: d });
    check(`${entity}: findTrees`, (await tree.findTrees()).map(shape), [
      ['a', [['b', [['c', []]]], ['d', [['e', []]]]]],
    ]);
    const c = await tree.findOneBy({ name: 'c' });
    check(`${entity}: descendants`, (await tree.findDescendants(b)).map((n) => n.name).sort(), ['b', 'c']);
    check(
      `${entity}: ancestors`,
      [(await tree.findAncestors(c)).map((n) => n.name).sort(), await tree.countAncestors(c)],
      [['a', 'b', 'c'], 3]
    );
    check(`${entity}: roots`, (await tree.findRoots()).map((n) => n.name), ['a']);
  }
  check(
    'closure table rows',
    (await ds.query('SELECT COUNT(*) AS n FROM closure_closure'))[0].n,
    '11' // a-a, a-b, a-c, a-d, a-e, b-b, b-c, c-c, d-d, d-e, e-e
  );
  check(
    'nested set numbers',
    await ds.query('SELECT name, nsleft AS l, nsright AS r FROM nestedset ORDER BY nsleft, id'),
    [
      { name: 'a', l: 1, r: 10 },
      { name: 'b', l: 2, r: 5 },
      { name: 'c', l: 3, r: 4 },
      { name: 'd', l: 6, r: 9 },
      { name: 'e', l: 7, r: 8 },
    ]
  );
  await ds.destroy();
}

async function typeorm() {
  await freshDatabase(TDB);
  const ds = dataSource('mysql', { entities: entities(false), synchronize: true });
  await ds.initialize();
  const q = (sql, params) => ds.query(sql, params);

  // The schema synchronize made.
  check('author columns', await columns(q, TDB, 'author'), [
    ['id', 'int(11)', 'NO', 'auto_increment'],
    ['name', 'varchar(100)', 'NO', ''],
    ['bio', 'text', 'YES', ''],
    ['meta', skarv ? 'json' : 'longtext', 'YES', ''],
    ['rating', 'decimal(6,2)', 'NO', ''],
    ['born', 'date', 'YES', ''],
    ['created', 'datetime(6)', 'NO', ''],
    ['updated', 'datetime(6)', 'NO', 'on update current_timestamp(6)'],
    ['version', 'int(11)', 'NO', ''],
    ['kind', "enum('a','b')", 'NO', ''],
    ['active', 'tinyint(4)', 'NO', ''],
  ]);
  check('book columns', await columns(q, TDB, 'book'), [
    ['id', 'int(11)', 'NO', 'auto_increment'],
    ['title', 'varchar(200)', 'NO', ''],
    ['pages', 'int(11)', 'NO', ''],
    ['removed', 'datetime(6)', 'YES', ''],
    ['author_id', 'int(11)', 'NO', ''],
  ]);
  check(
    'join table columns',
    await columns(q, TDB, 'book_tag'),
    [
      ['bookId', 'int(11)', 'NO', ''],
      ['tagId', 'int(11)', 'NO', ''],
    ]
  );
  const indexes = await q(
    'SELECT INDEX_NAME AS i, NON_UNIQUE AS nu, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS cols ' +
      "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'author' " +
      'GROUP BY INDEX_NAME, NON_UNIQUE ORDER BY INDEX_NAME',
    [TDB]
  );
  check(
    'author indexes',
    indexes.map((r) => [r.i, Number(r.nu), r.cols]),
    [
      ['IDX_author_rating', 1, 'rating'],
      ['IDX_d3962fd11a54d87f927e84d108', 0, 'name'], // TypeORM's name for UNIQUE (name)
      ['PRIMARY', 0, 'id'],
    ]
  );
  const fks = await q(
    'SELECT k.TABLE_NAME AS t, k.COLUMN_NAME AS c, k.REFERENCED_TABLE_NAME AS rt, k.REFERENCED_COLUMN_NAME AS rc, ' +
      'r.DELETE_RULE AS del FROM information_schema.KEY_COLUMN_USAGE k ' +
      'JOIN information_schema.REFERENTIAL_CONSTRAINTS r ' +
      'ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME ' +
      'WHERE k.TABLE_SCHEMA = ? AND k.REFERENCED_TABLE_NAME IS NOT NULL ORDER BY k.TABLE_NAME, k.COLUMN_NAME',
    [TDB]
  );
  check(
    'foreign keys',
    fks.map((r) => [r.t, r.c, r.rt, r.rc, r.del]),
    [
      ['book', 'author_id', 'author', 'id', 'CASCADE'],
      ['book_tag', 'bookId', 'book', 'id', 'CASCADE'],
      ['book_tag', 'tagId', 'tag', 'id', 'CASCADE'],
    ]
  );

  // Repositories: a cascading save, finds with relations.
  const authors = ds.getRepository('Author');
  const books = ds.getRepository('Book');
  const ann = await authors.save({
    name: 'ann',
    meta: { x: [1, 2] },
    rating: '4.50',
    born: '1990-01-02',
    books: [
      { title: 't1', tags: [{ label: 'red' }, { label: 'blue' }] },
      { title: 't2', pages: 3 },
    ],
  });
  check('saved', [typeof ann.id, ann.version, ann.kind, ann.books.map((b) => b.id)], ['number', 1, 'a', [1, 2]]);
  await authors.save([{ name: 'bob', kind: 'b', active: false }, { name: 'cy', rating: '1.25' }]);
  const found = await authors.find({
    relations: { books: { tags: true } },
    order: { id: 'ASC', books: { title: 'ASC' } },
  });
  check(
    'find with relations',
    found.map((a) => [
      a.name,
      a.meta,
      a.rating,
      a.born,
      a.version,
      a.kind,
      a.active,
      a.books.map((b) => [b.title, b.pages, b.tags.map((t) => t.label).sort()]),
    ]),
    [
      ['ann', { x: [1, 2] }, '4.50', '1990-01-02', 1, 'a', true, [['t1', 0, ['blue', 'red']], ['t2', 3, []]]],
      ['bob', null, '0.00', null, 1, 'b', false, []],
      ['cy', null, '1.25', null, 1, 'a', true, []],
    ]
  );
  const t2 = await books.findOne({ where: { title: 't2' }, relations: { author: true } });
  check('many-to-one', [t2.pages, t2.author.name], [3, 'ann']);
  check('findBy', (await authors.findBy({ kind: 'a' })).map((a) => a.name).sort(), ['ann', 'cy']);
  check('count', await authors.count({ where: { active: true } }), 2);
  const names = async (where) => (await authors.find({ where, order: { name: 'ASC' } })).map((a) => a.name);
  check('In', await names({ name: In(['cy', 'ann', 'zz']) }), ['ann', 'cy']);
  check('Like', await names({ name: Like('%y') }), ['cy']);
  check('Between', await names({ rating: Between('1.00', '4.50') }), ['ann', 'cy']);
  check('IsNull', await names({ meta: IsNull() }), ['bob', 'cy']);
  check('Not', await names({ kind: Not('a') }), ['bob']);
  check('MoreThan', await names({ rating: MoreThan(1), active: true }), ['ann', 'cy']);
  check('OR of wheres', await names([{ kind: 'b' }, { rating: '1.25' }]), ['bob', 'cy']);
  check(
    'select, skip, take',
    await authors.find({ select: { name: true, rating: true }, order: { rating: 'DESC' }, skip: 1, take: 1 }),
    [{ name: 'cy', rating: '1.25' }]
  );
  check('exists', [await authors.existsBy({ name: 'bob' }), await authors.existsBy({ name: 'nobody' })], [true, false]);
  check('sum, maximum', [await books.sum('pages'), await books.maximum('pages')], [3, 3]);
  const runner = ds.createQueryRunner();
  const introspected = await runner.getTable('book');
  await runner.release();
  check(
    'getTable',
    [
      introspected.columns.map((c) => [c.name, c.type, c.isNullable, c.isPrimary, c.isGenerated]),
      introspected.foreignKeys.map((f) => [f.columnNames, f.referencedTableName, f.referencedColumnNames, f.onDelete]),
    ],
    [
      [
        ['id', 'int', false, true, true],
        ['title', 'varchar', false, false, false],
        ['pages', 'int', false, false, false],
        ['removed', 'datetime', true, false, false],
        ['author_id', 'int', false, false, false],
      ],
      [[['author_id'], 'author', ['id'], 'CASCADE']],
    ]
  );

  // The version column: each save that changes the row adds one; an
  // optimistic lock on an older version fails.
  ann.rating = '5.00';
  await authors.save(ann);
  const annNow = await authors.findOneBy({ id: ann.id });
  check('version', [annNow.version, annNow.rating], [2, '5.00']);
  check('created kept', annNow.created.getTime(), ann.created.getTime());
  await fails(
    'optimistic lock',
    authors.findOne({ where: { id: ann.id }, lock: { mode: 'optimistic', version: 1 } }),
    (e) => e.name === 'OptimisticLockVersionMismatchError'
  );
  check(
    'optimistic lock passes',
    (await authors.findOne({ where: { id: ann.id }, lock: { mode: 'optimistic', version: 2 } })).name,
    'ann'
  );

  // The query builder: joins, GROUP BY, parameters, paging with a join
  // (TypeORM's DISTINCT subquery), bulk update and delete.
  const perAuthor = await authors
    .createQueryBuilder('a')
    .leftJoin('a.books', 'b')
    .select('a.name', 'name')
    .addSelect('COUNT(b.id)', 'n')
    .addSelect('COALESCE(SUM(b.pages), 0)', 'pages')
    .groupBy('a.name')
    .orderBy('a.name')
    .getRawMany();
  check(
    'left join group by',
    perAuthor.map((r) => [r.name, Number(r.n), Number(r.pages)]),
    [
      ['ann', 2, 3],
      ['bob', 0, 0],
      ['cy', 0, 0],
    ]
  );
  const withTags = await books
    .createQueryBuilder('b')
    .innerJoinAndSelect('b.author', 'a')
    .innerJoinAndSelect('b.tags', 't')
    .where('t.label IN (:...labels)', { labels: ['red', 'green'] })
    .andWhere('a.rating > :r', { r: 4 })
    .getMany();
  check(
    'inner joins',
    withTags.map((b) => [b.title, b.author.name, b.tags.map((t) => t.label)]),
    [['t1', 'ann', ['red']]]
  );
  const [page, total] = await authors
    .createQueryBuilder('a')
    .leftJoinAndSelect('a.books', 'b')
    .orderBy('a.name', 'DESC')
    .skip(1)
    .take(2)
    .getManyAndCount();
  check('paging with a join', [total, page.map((a) => [a.name, a.books.length])], [3, [['bob', 0], ['ann', 2]]]);
  const sub = await authors
    .createQueryBuilder('a')
    .where((qb) => 'a.id IN ' + qb.subQuery().select('b.author_id').from('book', 'b').where('b.pages > 0').getQuery())
    .getMany();
  check('subquery', sub.map((a) => a.name), ['ann']);
  const cte = await ds
    .createQueryBuilder()
    .addCommonTableExpression(
      authors.createQueryBuilder('a').select('a.name', 'name').where('a.kind = :k', { k: 'a' }),
      'ka'
    )
    .select('ka.name', 'name')
    .from('ka', 'ka')
    .orderBy('ka.name', 'DESC')
    .getRawMany();
  check('common table expression', cte, [{ name: 'cy' }, { name: 'ann' }]);
  const streamed = [];
  for await (const row of await authors.createQueryBuilder('a').select('a.name', 'name').orderBy('a.id').stream()) {
    streamed.push(row.name);
  }
  check('stream', streamed, ['ann', 'bob', 'cy']);
  const bumped = await books
    .createQueryBuilder()
    .update()
    .set({ pages: () => 'pages + 10' })
    .where('title = :t', { t: 't1' })
    .execute();
  check('bulk update', bumped.affected, 1);
  check('bulk update wrote', (await books.findOneBy({ title: 't1' })).pages, 10);
  await books.increment({ title: 't2' }, 'pages', 2);
  check('increment', (await books.findOneBy({ title: 't2' })).pages, 5);
  const ignored = await ds
    .createQueryBuilder()
    .insert()
    .into('tag')
    .values([{ id: 1, label: 'dup' }, { label: 'green' }])
    .orIgnore()
    .execute();
  check('insert ignore', [ignored.raw.affectedRows, await ds.getRepository('Tag').countBy({ label: 'dup' })], [1, 0]);
  const having = await books
    .createQueryBuilder('b')
    .select('b.author_id', 'author')
    .addSelect('MAX(b.pages)', 'most')
    .groupBy('b.author_id')
    .having('COUNT(*) > :n', { n: 1 })
    .getRawOne();
  check('having', [having.author, having.most], [ann.id, 10]);

  // Soft delete: the deleteDate column set, the row hidden, restored.
  await books.softDelete({ title: 't2' });
  check('soft deleted', [await books.count(), await books.count({ withDeleted: true })], [1, 2]);
  check('restore', (await books.restore({ title: 't2' })).affected, 1);
  check('restored', await books.count(), 2);

  // Transactions: a commit, a rollback on a duplicate key (1062), an
  // isolation level, and a savepoint rolled back after writes.
  await ds.transaction(async (m) => {
    await m.save('Author', { name: 'dee' });
    await m.update('Author', { name: 'bob' }, { rating: '2.00' });
  });
  await fails(
    'duplicate in a transaction',
    ds.transaction(async (m) => {
      await m.save('Author', { name: 'eve' });
      await m.save('Author', { name: 'ann' });
    }),
    (e) => e.errno === 1062 && e.code === 'ER_DUP_ENTRY'
  );
  check(
    'rolled back',
    (await authors.find({ order: { name: 'ASC' } })).map((a) => a.name),
    ['ann', 'bob', 'cy', 'dee']
  );
  // SET TRANSACTION ISOLATION LEVEL, then START TRANSACTION.
  await ds.transaction('READ COMMITTED', (m) => m.update('Author', { name: 'dee' }, { rating: '0.50' }));
  check('isolation level', (await authors.findOneBy({ name: 'dee' })).rating, '0.50');
  const qr = ds.createQueryRunner();
  await qr.connect();
  await qr.startTransaction();
  await qr.manager.update('Author', { name: 'cy' }, { rating: '3.00' });
  await qr.startTransaction(); // SAVEPOINT typeorm_1
  await qr.manager.save('Author', { name: 'zed' });
  await qr.manager.update('Author', { name: 'cy' }, { rating: '9.00' });
  await qr.rollbackTransaction(); // ROLLBACK TO SAVEPOINT typeorm_1
  check('inside after savepoint rollback', (await qr.manager.findOneBy('Author', { name: 'cy' })).rating, '3.00');
  await qr.commitTransaction();
  await qr.release();
  check('savepoint: inner writes gone', await authors.countBy({ name: 'zed' }), 0);
  check('savepoint: outer write kept', (await authors.findOneBy({ name: 'cy' })).rating, '3.00');
  const qr2 = ds.createQueryRunner();
  await qr2.connect();
  await qr2.startTransaction();
  await qr2.manager.delete('Author', { name: 'dee' });
  await qr2.rollbackTransaction();
  await qr2.release();
  check('rollback', await authors.countBy({ name: 'dee' }), 1);
  // SELECT … FOR UPDATE in a transaction.
  await ds.transaction(async (m) => {
    const locked = await m.findOne('Author', { where: { name: 'cy' }, lock: { mode: 'pessimistic_write' } });
    await m.update('Author', { id: locked.id }, { rating: '3.50' });
  });
  check('for update', (await authors.findOneBy({ name: 'cy' })).rating, '3.50');
  check(
    'for update skip locked',
    await ds.transaction((m) =>
      m.find('Author', {
        select: { name: true },
        where: { kind: 'b' },
        lock: { mode: 'pessimistic_write', onLocked: 'skip_locked' },
      })
    ),
    [{ name: 'bob' }]
  );

  // Upsert: INSERT … ON DUPLICATE KEY UPDATE on the unique name.
  await authors.upsert(
    [
      { name: 'bob', rating: '7.50' },
      { name: 'fay', rating: '6.00' },
    ],
    ['name']
  );
  check(
    'upsert',
    (await authors.find({ where: [{ name: 'bob' }, { name: 'fay' }], order: { name: 'ASC' } })).map((a) => [
      a.name,
      a.rating,
      a.kind,
    ]),
    [
      ['bob', '7.50', 'b'],
      ['fay', '6.00', 'a'],
    ]
  );

  // ON DELETE CASCADE from the author to its books and their tags' rows.
  const deleted = await authors.createQueryBuilder().delete().where('name = :n', { n: 'ann' }).execute();
  check('delete', deleted.affected, 1);
  check('cascade', [await books.count(), Number((await q('SELECT COUNT(*) AS n FROM book_tag'))[0].n)], [0, 0]);
  check('delete all', (await ds.getRepository('Tag').createQueryBuilder().delete().execute()).affected, 3);
  await books.save({ title: 't3', author: { id: (await authors.findOneBy({ name: 'bob' })).id } });
  await q("UPDATE author SET meta = '{\"k\": \"v\"}' WHERE name = 'bob'");
  await ds.destroy();

  // What a second synchronize of the same entities would change. MariaDB's
  // information_schema shows a JSON column as LONGTEXT and a nullable
  // column's default as the word NULL. TypeORM's `mysql` driver expects
  // MySQL's forms, so against MariaDB it sees changes, among them a DROP
  // and ADD of the JSON column, which would lose its values; its `mariadb`
  // driver reads MariaDB's forms and sees none. Skarv says it is MySQL 8
  // and gives MySQL's forms (docs/sql.md), so there the `mysql` driver
  // sees none, and the `mariadb` driver (which takes JSON for LONGTEXT)
  // would drop and re-add the JSON column. The changed entities below are
  // synchronized with the driver that fits.
  const fits = skarv ? 'mysql' : 'mariadb';
  const same = dataSource(fits, { entities: entities(false) });
  await same.initialize();
  check(`${fits} driver: second synchronize`, (await same.driver.createSchemaBuilder().log()).upQueries, []);
  await same.destroy();
  const other = dataSource(skarv ? 'mariadb' : 'mysql', { entities: entities(false) });
  await other.initialize();
  check(
    'the other driver: second synchronize',
    (await other.driver.createSchemaBuilder().log()).upQueries.map((u) => u.query),
    skarv
      ? ['ALTER TABLE `author` DROP COLUMN `meta`', 'ALTER TABLE `author` ADD `meta` longtext NULL']
      : [
          'ALTER TABLE `author` CHANGE `bio` `bio` text NULL',
          'ALTER TABLE `author` DROP COLUMN `meta`',
          'ALTER TABLE `author` ADD `meta` json NULL',
          'ALTER TABLE `author` CHANGE `born` `born` date NULL',
          'ALTER TABLE `book` CHANGE `removed` `removed` datetime(6) NULL',
        ]
  );
  await other.destroy();

  // A second synchronize with changed entities: ALTERs, data kept, and
  // then nothing left to change.
  const changed = dataSource(fits, { entities: entities(true) });
  await changed.initialize();
  check(
    'the alter',
    (await changed.driver.createSchemaBuilder().log()).upQueries.map((u) => u.query),
    [
      'ALTER TABLE `author` DROP COLUMN `bio`',
      'ALTER TABLE `author` ADD `nick` varchar(50) NULL',
      "ALTER TABLE `author` ADD `score` int NOT NULL DEFAULT '0'",
      "ALTER TABLE `author` CHANGE `rating` `rating` decimal(6,2) NOT NULL DEFAULT '1.00'",
      'CREATE INDEX `IDX_author_kind_born` ON `author` (`kind`, `born`)',
    ]
  );
  await changed.synchronize();
  check(
    'after the alter',
    (await columns((s, p) => changed.query(s, p), TDB, 'author')).map((c) => c.slice(0, 3)),
    [
      ['id', 'int(11)', 'NO'],
      ['name', 'varchar(100)', 'NO'],
      ['meta', skarv ? 'json' : 'longtext', 'YES'],
      ['rating', 'decimal(6,2)', 'NO'],
      ['born', 'date', 'YES'],
      ['created', 'datetime(6)', 'NO'],
      ['updated', 'datetime(6)', 'NO'],
      ['version', 'int(11)', 'NO'],
      ['kind', "enum('a','b')", 'NO'],
      ['active', 'tinyint(4)', 'NO'],
      ['nick', 'varchar(50)', 'YES'],
      ['score', 'int(11)', 'NO'],
    ]
  );
  check('no more changes', (await changed.driver.createSchemaBuilder().log()).upQueries, []);
  const bob = await changed.getRepository('Author').findOne({ where: { name: 'bob' }, relations: { books: true } });
  check(
    'data kept',
    [bob.meta, bob.rating, bob.nick, bob.score, bob.books.map((b) => b.title)],
    [{ k: 'v' }, '7.50', null, 0, ['t3']]
  );
  await changed.getRepository('Author').insert({ name: 'gus' });
  check('new default', (await changed.getRepository('Author').findOneBy({ name: 'gus' })).rating, '1.00');
  await changed.destroy();

  await trees();

  // Migrations: TypeORM's `migrations` table, a migration that creates a
  // table, adds and renames a column and an index, run and undone.
  class CreateEvent1700000000000 {
    async up(runner) {
      await runner.createTable(
        new Table({
          name: 'event',
          columns: [
            { name: 'id', type: 'int', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
            { name: 'title', type: 'varchar', length: '80' },
          ],
        })
      );
      await runner.addColumn('event', new TableColumn({ name: 'at', type: 'datetime', isNullable: true }));
      await runner.renameColumn('event', 'title', 'headline');
      await runner.createIndex('event', new TableIndex({ name: 'IDX_event_at', columnNames: ['at'] }));
      await runner.query("INSERT INTO event (headline, at) VALUES ('launch', '2024-05-06 07:08:09')");
    }
    async down(runner) {
      await runner.dropTable('event');
    }
  }
  const migrating = dataSource('mysql', { migrations: [CreateEvent1700000000000], migrationsTableName: 'migrations' });
  await migrating.initialize();
  check('pending migrations', await migrating.showMigrations(), true);
  const ran = await migrating.runMigrations({ transaction: 'each' });
  check('migrations run', ran.map((m) => m.name), ['CreateEvent1700000000000']);
  check('migrations table', await migrating.query('SELECT timestamp, name FROM migrations'), [
    { timestamp: '1700000000000', name: 'CreateEvent1700000000000' },
  ]);
  check(
    'migrated table',
    (await columns((s, p) => migrating.query(s, p), TDB, 'event')).map((c) => c.slice(0, 3)),
    [
      ['id', 'int(11)', 'NO'],
      ['headline', 'varchar(80)', 'NO'],
      ['at', 'datetime', 'YES'],
    ]
  );
  check('migrated row', (await migrating.query('SELECT headline FROM event'))[0].headline, 'launch');
  check('nothing pending', await migrating.showMigrations(), false);
  check('run again', await migrating.runMigrations(), []);
  await migrating.undoLastMigration();
  const migrationRunner = migrating.createQueryRunner();
  check(
    'undone',
    [await migrating.query('SELECT * FROM migrations'), await migrationRunner.hasTable('event')],
    [[], false]
  );
  await migrationRunner.release();
  await migrating.destroy();
}

// ------------------------------------------------------------------- knex

async function knexChecks() {
  await freshDatabase(KDB);
  const knex = knexFactory({
    client: 'mysql2',
    connection: { host, port, user: 'root', password: '', database: KDB, supportBigNumbers: true },
    pool: { min: 0, max: 4 },
  });
  try {
    await knexBody(knex);
  } finally {
    await knex.destroy();
  }
}

async function knexBody(knex) {
  await knex.schema.createTable('team', (t) => {
    t.increments('id');
    t.string('name', 40).notNullable().unique();
    t.decimal('budget', 10, 2).defaultTo(0);
    t.json('data');
    t.boolean('active').notNullable().defaultTo(true);
    t.enu('tier', ['gold', 'silver']).defaultTo('silver');
    t.timestamps(true, true);
  });
  await knex.schema.createTable('player', (t) => {
    t.bigIncrements('id');
    t.string('name', 60).notNullable();
    t.integer('team_id').unsigned().references('id').inTable('team').onDelete('CASCADE');
    t.integer('goals').notNullable().defaultTo(0);
    t.date('joined');
    t.text('notes');
    t.index(['team_id', 'goals'], 'player_team_goals');
    t.unique(['team_id', 'name']);
  });
  check('hasTable', [await knex.schema.hasTable('team'), await knex.schema.hasTable('nope')], [true, false]);
  check(
    'hasColumn',
    [await knex.schema.hasColumn('player', 'goals'), await knex.schema.hasColumn('player', 'nope')],
    [true, false]
  );
  const info = await knex('team').columnInfo();
  check(
    'columnInfo',
    Object.entries(info).map(([name, c]) => [name, c.type, c.maxLength, c.nullable, c.defaultValue]),
    [
      ['id', 'int', null, false, null],
      ['name', 'varchar', 40, false, null],
      ['budget', 'decimal', null, true, '0.00'],
      // MySQL 8's forms on Skarv, MariaDB's there (docs/sql.md).
      skarv ? ['data', 'json', null, true, null] : ['data', 'longtext', 4294967295, true, null],
      ['active', 'tinyint', null, false, '1'],
      ['tier', 'enum', 6, true, skarv ? 'silver' : "'silver'"],
      ['created_at', 'timestamp', null, false, 'current_timestamp()'],
      ['updated_at', 'timestamp', null, false, 'current_timestamp()'],
    ]
  );
  check(
    'player columns',
    await columns((s, p) => knex.raw(s, p).then(([rows]) => rows), KDB, 'player'),
    [
      ['id', 'bigint(20) unsigned', 'NO', 'auto_increment'],
      ['name', 'varchar(60)', 'NO', ''],
      ['team_id', 'int(10) unsigned', 'YES', ''],
      ['goals', 'int(11)', 'NO', ''],
      ['joined', 'date', 'YES', ''],
      ['notes', 'text', 'YES', ''],
    ]
  );
  const [indexRows] = await knex.raw(
    'SELECT INDEX_NAME AS i, NON_UNIQUE AS nu, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS cols ' +
      "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'player' " +
      'GROUP BY INDEX_NAME, NON_UNIQUE ORDER BY INDEX_NAME',
    [KDB]
  );
  check(
    'player indexes',
    indexRows.filter((r) => r.i !== 'player_team_id_foreign').map((r) => [r.i, Number(r.nu), r.cols]),
    [
      ['player_team_goals', 1, 'team_id,goals'],
      ['player_team_id_name_unique', 0, 'team_id,name'],
      ['PRIMARY', 0, 'id'],
    ]
  );
  const [fkRows] = await knex.raw(
    'SELECT k.CONSTRAINT_NAME AS n, k.COLUMN_NAME AS c, k.REFERENCED_TABLE_NAME AS rt, r.DELETE_RULE AS del ' +
      'FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r ' +
      'ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME WHERE k.TABLE_SCHEMA = ?',
    [KDB]
  );
  check(
    'foreign key',
    fkRows.map((r) => [r.n, r.c, r.rt, r.del]),
    [['player_team_id_foreign', 'team_id', 'team', 'CASCADE']]
  );

  // Inserts: MySQL gives the first generated id of a batch.
  const owls = { name: 'owls', budget: '100.50', data: JSON.stringify({ c: 'gray' }) };
  check('insert id', await knex('team').insert(owls), [1]);
  check(
    'batch insert id',
    await knex('team').insert([
      { name: 'bats', tier: 'gold' },
      { name: 'cats', active: false },
    ]),
    [2]
  );
  check(
    'player insert id',
    await knex('player').insert([
      { name: 'p1', team_id: 1, goals: 3, joined: '2020-02-03' },
      { name: 'p2', team_id: 1, goals: 5 },
      { name: 'p3', team_id: 2, goals: 1, notes: 'n' },
    ]),
    [1]
  );
  await fails(
    'foreign key violation',
    knex('player').insert({ name: 'px', team_id: 99 }),
    (e) => e.errno === 1452 && e.code === 'ER_NO_REFERENCED_ROW_2'
  );
  await fails('duplicate', knex('team').insert({ name: 'owls' }), (e) => e.errno === 1062);
  check(
    'select',
    await knex('team').select('id', 'name', 'budget', 'data', 'active', 'tier').orderBy('id'),
    [
      { id: 1, name: 'owls', budget: '100.50', data: { c: 'gray' }, active: 1, tier: 'silver' },
      { id: 2, name: 'bats', budget: '0.00', data: null, active: 1, tier: 'gold' },
      { id: 3, name: 'cats', budget: '0.00', data: null, active: 0, tier: 'silver' },
    ]
  );
  check(
    'join',
    await knex('player as p')
      .join('team as t', 't.id', 'p.team_id')
      .where('t.active', true)
      .andWhere('p.goals', '>=', 1)
      .select('p.name as player', 't.name as team')
      .orderBy('p.goals', 'desc'),
    [
      { player: 'p2', team: 'owls' },
      { player: 'p1', team: 'owls' },
      { player: 'p3', team: 'bats' },
    ]
  );
  check(
    'left join group by having',
    await knex('team as t')
      .leftJoin('player as p', 'p.team_id', 't.id')
      .groupBy('t.name')
      .select('t.name')
      .count('p.id as n')
      .sum('p.goals as goals')
      .havingRaw('COUNT(p.id) < ?', [2])
      .orderBy('t.name'),
    [
      { name: 'bats', n: 1, goals: '1' },
      { name: 'cats', n: 0, goals: null },
    ]
  );
  check(
    'whereIn, whereNull, first',
    await knex('player').whereIn('name', ['p1', 'p3']).whereNull('notes').first('name', 'joined'),
    { name: 'p1', joined: new Date(2020, 1, 3) }
  );
  check(
    'subquery',
    (await knex('team').whereIn('id', knex('player').select('team_id').where('goals', '>', 2)).pluck('name')),
    ['owls']
  );
  check(
    'with (CTE)',
    await knex
      .with('scorers', (qb) => qb.from('player').where('goals', '>', 2).select('team_id', 'name'))
      .from('scorers')
      .join('team', 'team.id', 'scorers.team_id')
      .select('scorers.name', 'team.name as team')
      .orderBy('scorers.name'),
    [
      { name: 'p1', team: 'owls' },
      { name: 'p2', team: 'owls' },
    ]
  );
  check(
    'union',
    await knex('team')
      .select('name')
      .where('tier', 'gold')
      .union((qb) => qb.select('name').from('player').where('goals', 5))
      .orderBy('name'),
    [{ name: 'bats' }, { name: 'p2' }]
  );
  check(
    'row_number over partition',
    (await knex('player').select('name').rowNumber('rn', 'goals', 'team_id').orderBy('name')).map((r) => [
      r.name,
      r.rn,
    ]),
    [
      ['p1', 1],
      ['p2', 2],
      ['p3', 1],
    ]
  );
  check(
    'whereExists',
    await knex('team as t')
      .whereExists(knex('player as p').whereRaw('p.team_id = t.id').select(knex.raw('1')))
      .orderBy('t.id')
      .pluck('t.name'),
    ['owls', 'bats']
  );
  check('jsonExtract', await knex('team').jsonExtract('data', '$.c', 'color').where('id', 1), [{ color: 'gray' }]);
  check(
    'distinct, offset, limit',
    await knex('player').distinct('team_id').orderBy('team_id').offset(1).limit(5),
    [{ team_id: 2 }]
  );
  check('countDistinct', await knex('player').countDistinct('team_id as n'), [{ n: 2 }]);
  check('update count', await knex('player').where('team_id', 1).increment('goals', 10), 2);
  // mysql2 sets CLIENT_FOUND_ROWS: a row matched but not changed counts.
  check('update unchanged', await knex('team').where('name', 'owls').update({ budget: '100.50' }), 1);
  check('delete count', await knex('player').where('name', 'p3').del(), 1);

  // onConflict().merge(): INSERT … ON DUPLICATE KEY UPDATE.
  await knex('team')
    .insert([
      { name: 'owls', budget: '1.00' },
      { name: 'elks', budget: '2.00' },
    ])
    .onConflict('name')
    .merge(['budget']);
  check(
    'merge',
    await knex('team').whereIn('name', ['owls', 'elks']).orderBy('name').select('name', 'budget', 'tier'),
    [
      { name: 'elks', budget: '2.00', tier: 'silver' },
      { name: 'owls', budget: '1.00', tier: 'silver' },
    ]
  );
  await knex('team').insert({ name: 'owls' }).onConflict('name').ignore();
  check('ignore', (await knex('team').where('name', 'owls').first('budget')).budget, '1.00');

  // Transactions: a commit, a rollback when the handler throws, a nested
  // transaction (a savepoint) rolled back after writes.
  await knex.transaction(async (trx) => {
    const [id] = await trx('team').insert({ name: 'foxes' });
    await trx('player').insert({ name: 'f1', team_id: id });
  });
  await fails(
    'transaction rolled back',
    knex.transaction(async (trx) => {
      await trx('team').insert({ name: 'gnus' });
      await trx('team').insert({ name: 'owls' });
    }),
    (e) => e.errno === 1062
  );
  check('after rollback', await knex('team').orderBy('name').pluck('name'), ['bats', 'cats', 'elks', 'foxes', 'owls']);
  await knex.transaction(async (trx) => {
    await trx('team').where('name', 'cats').update({ budget: '3.00' });
    await fails(
      'nested transaction',
      trx.transaction(async (inner) => {
        await inner('team').insert({ name: 'hens' });
        await inner('team').where('name', 'cats').update({ budget: '9.00' });
        throw new Error('inner');
      }),
      (e) => e.message === 'inner'
    );
    check('inside after savepoint rollback', (await trx('team').where('name', 'cats').first('budget')).budget, '3.00');
  });
  check(
    'savepoint',
    [
      await knex('team').where('name', 'hens').pluck('id'),
      (await knex('team').where('name', 'cats').first('budget')).budget,
    ],
    [[], '3.00']
  );
  await knex.transaction(async (t) => {
    const row = await t('team').where('name', 'bats').forUpdate().first('budget');
    await t('team').where('name', 'bats').update({ budget: Number(row.budget) + 5 });
  });
  check('forUpdate', (await knex('team').where('name', 'bats').first('budget')).budget, '5.00');
  const trx = await knex.transaction();
  await trx('player').del();
  check('inside', await trx('player').count('* as n'), [{ n: 0 }]);
  await trx.rollback();
  check('explicit rollback', await knex('player').count('* as n'), [{ n: 3 }]);

  // Raw queries with positional and named bindings.
  const [sum] = await knex.raw('SELECT ? + ? AS s, ? AS t', [1, 2, 'x']);
  check('raw', sum, [{ s: 3, t: 'x' }]);
  const [named] = await knex.raw('SELECT name FROM team WHERE tier = :tier AND active = :on ORDER BY name', {
    tier: 'gold',
    on: 1,
  });
  check('raw named', named, [{ name: 'bats' }]);
  check(
    'raw identifiers',
    (await knex.raw('SELECT ?? FROM ?? WHERE ?? = ?', ['name', 'team', 'id', 2]))[0],
    [{ name: 'bats' }]
  );
  await fails('raw syntax error', knex.raw('SELEC 1'), (e) => e.errno === 1064);
  await fails('raw missing table', knex.raw('SELECT * FROM nope'), (e) => e.errno === 1146);

  // alterTable: add, rename, alter, drop a unique key and a column, add an
  // index; ON DELETE CASCADE then.
  await knex.schema.alterTable('player', (t) => {
    t.string('position', 10).defaultTo('fw');
    t.renameColumn('joined', 'joined_on');
    t.dropUnique(['team_id', 'name']);
    t.index(['name'], 'player_name');
  });
  await knex.schema.alterTable('player', (t) => {
    t.string('name', 100).notNullable().alter();
    t.dropColumn('notes');
  });
  check(
    'renamed',
    [await knex.schema.hasColumn('player', 'joined_on'), await knex.schema.hasColumn('player', 'joined')],
    [true, false]
  );
  check(
    'altered columns',
    await columns((s, p) => knex.raw(s, p).then(([rows]) => rows), KDB, 'player'),
    [
      ['id', 'bigint(20) unsigned', 'NO', 'auto_increment'],
      ['name', 'varchar(100)', 'NO', ''],
      ['team_id', 'int(10) unsigned', 'YES', ''],
      ['goals', 'int(11)', 'NO', ''],
      ['joined_on', 'date', 'YES', ''],
      ['position', 'varchar(10)', 'YES', ''],
    ]
  );
  check(
    'data kept',
    await knex('player').orderBy('id').select('name', 'goals', 'joined_on', 'position'),
    [
      { name: 'p1', goals: 13, joined_on: new Date(2020, 1, 3), position: 'fw' },
      { name: 'p2', goals: 15, joined_on: null, position: 'fw' },
      { name: 'f1', goals: 0, joined_on: null, position: 'fw' },
    ]
  );
  const [after] = await knex.raw(
    'SELECT INDEX_NAME AS i FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ' +
      'GROUP BY INDEX_NAME ORDER BY INDEX_NAME',
    [KDB, 'player']
  );
  check(
    'indexes after alter',
    after.map((r) => r.i).filter((i) => i !== 'player_team_id_foreign'),
    ['player_name', 'player_team_goals', 'PRIMARY']
  );
  check(
    'cascade',
    [await knex('team').where('name', 'owls').del(), await knex('player').count('* as n')],
    [1, [{ n: 1 }]]
  );

  // A composite primary key, batchInsert, a foreign key added and dropped
  // by ALTER, renameTable, a view.
  await knex.schema.createTable('score', (t) => {
    t.integer('team_id').unsigned().notNullable();
    t.integer('round').notNullable();
    t.integer('points').notNullable();
    t.primary(['team_id', 'round']);
  });
  await knex.schema.alterTable('score', (t) => t.foreign('team_id', 'score_team_fk').references('team.id'));
  const teams = await knex('team').orderBy('id').pluck('id');
  check('teams', teams.length, 4);
  const rows = [];
  for (const id of teams) {
    for (let round = 1; round <= 10; round += 1) rows.push({ team_id: id, round, points: id * round });
  }
  await knex.batchInsert('score', rows, 7);
  check(
    'batchInsert',
    await knex('score').select(knex.raw('COUNT(*) AS n, SUM(points) AS p')),
    [{ n: rows.length, p: String(rows.reduce((a, r) => a + r.points, 0)) }]
  );
  await fails(
    'composite key duplicate',
    knex('score').insert({ team_id: teams[0], round: 1, points: 0 }),
    (e) => e.errno === 1062
  );
  await fails(
    'foreign key added by alter',
    knex('score').insert({ team_id: 999, round: 1, points: 0 }),
    (e) => e.errno === 1452
  );
  await knex.schema.alterTable('score', (t) => t.dropForeign('team_id', 'score_team_fk'));
  await knex('score').insert({ team_id: 999, round: 1, points: 0 });
  await knex.schema.renameTable('score', 'points');
  check(
    'renameTable',
    [await knex.schema.hasTable('score'), await knex('points').count('* as n')],
    [false, [{ n: rows.length + 1 }]]
  );
  await knex.schema.createView('best', (v) => {
    v.columns(['team_id', 'total']);
    v.as(knex('points').select('team_id').sum('points').groupBy('team_id'));
  });
  check(
    'view',
    await knex('best').orderBy('team_id'),
    [...teams.map((id) => ({ team_id: id, total: String(id * 55) })), { team_id: 999, total: '0' }]
  );
  await knex.schema.dropView('best');
  await knex.schema.dropTable('points');

  // Migrations: the knex_migrations and knex_migrations_lock tables.
  const migrations = {
    m1_create_match: {
      up: (k) =>
        k.schema.createTable('match', (t) => {
          t.increments();
          t.integer('home').unsigned().notNullable().references('team.id');
          t.dateTime('at', { precision: 3 });
        }),
      down: (k) => k.schema.dropTable('match'),
    },
    m2_add_score: {
      up: (k) => k.schema.alterTable('match', (t) => t.smallint('score').defaultTo(0)),
      down: (k) => k.schema.alterTable('match', (t) => t.dropColumn('score')),
    },
  };
  const migrationSource = {
    getMigrations: async () => Object.keys(migrations),
    getMigrationName: (name) => name,
    getMigration: async (name) => migrations[name],
  };
  const [batch, done] = await knex.migrate.latest({ migrationSource });
  check('migrate latest', [batch, done], [1, ['m1_create_match', 'm2_add_score']]);
  check(
    'knex_migrations',
    await knex('knex_migrations').orderBy('id').select('name', 'batch'),
    [
      { name: 'm1_create_match', batch: 1 },
      { name: 'm2_add_score', batch: 1 },
    ]
  );
  check('knex_migrations_lock', await knex('knex_migrations_lock').select('is_locked'), [{ is_locked: 0 }]);
  check('migrated', await knex.schema.hasColumn('match', 'score'), true);
  check('migrate again', await knex.migrate.latest({ migrationSource }), [1, []]);
  check('migrate rollback', await knex.migrate.rollback({ migrationSource }), [1, ['m2_add_score', 'm1_create_match']]);
  check(
    'rolled back',
    [await knex.schema.hasTable('match'), await knex('knex_migrations').count('* as n')],
    [false, [{ n: 0 }]]
  );

  await knex.schema.dropTable('player').dropTableIfExists('team');
  check('dropped', await knex.schema.hasTable('team'), false);
}

(async () => {
  const started = Date.now();
  await typeorm();
  console.log('typeorm: ok');
  await knexChecks();
  console.log('knex: ok');
  console.log(`drivers-typeorm-knex: ok (${checks} checks, ${((Date.now() - started) / 1000).toFixed(1)} s)`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
