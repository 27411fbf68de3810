// Node's mysql2 driver (text and binary protocol, types, JSON by the
// column's type code) and Sequelize 6 (sync, the ORM's queries,
// transactions and savepoints, upsert, sync({alter}) and introspection)
// against a MySQL-protocol server. Every check compares with values the
// program knows; the first that fails stops it with its name. Prints
// `drivers-node: ok` at the end. The same program passes against MariaDB
// 10.11.
//
//     node orms.js --host 127.0.0.1 --port 3306
//
// Its packages are pinned by package-lock.json (`npm ci`; .ci/run runs it).

'use strict';
const assert = require('node:assert/strict');
const mysql = require('mysql2/promise');
const { Sequelize, DataTypes, Op, QueryTypes } = require('sequelize');

const { host, port } = require('./server');
const DB = 'drivers_node';

function check(what, got, want) {
  try {
    assert.deepStrictEqual(got, want);
  } catch (e) {
    throw new Error(`drivers-node: ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

async function driver() {
  const conn = await mysql.createConnection({ host, port, user: 'root', supportBigNumbers: true, bigNumberStrings: true });
  await conn.query(`DROP DATABASE IF EXISTS ${DB}`);
  await conn.query(`CREATE DATABASE ${DB}`);
  await conn.query(`USE ${DB}`);
  await conn.query(
    'CREATE TABLE m (id INT AUTO_INCREMENT PRIMARY KEY, a VARCHAR(20), d DECIMAL(10,2), ' +
      't DATETIME(3), j JSON, b BLOB, big BIGINT UNSIGNED, dt DATE, f DOUBLE)'
  );
  const at = new Date(Date.UTC(2020, 0, 2, 3, 4, 5, 678));
  const [ins] = await conn.execute(
    'INSERT INTO m (a, d, t, j, b, big, dt, f) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ['x', '1.25', at, JSON.stringify({ k: [1, 2] }), Buffer.from([0, 255]), '18446744073709551615', '2021-03-04', 1.5]
  );
  check('insertId', [ins.insertId, ins.affectedRows], [1, 1]);
  const [two] = await conn.query("INSERT INTO m (a) VALUES ('y'), ('z')");
  // The OK packet's info, as the server wrote it (without
  // CLIENT_SESSION_TRACK mysql2 reads it to the packet's end, length
  // byte and all).
  check('insert info', two.info, 'Records: 2  Duplicates: 0  Warnings: 0');
  const [upd] = await conn.query("UPDATE m SET a = CONCAT(a, '') WHERE id > 1");
  check('update info', [upd.info, upd.changedRows], ['Rows matched: 2  Changed: 0  Warnings: 0', 0]);
  const want = {
    id: 1,
    a: 'x',
    d: '1.25',
    j: { k: [1, 2] },
    b: Buffer.from([0, 255]),
    big: '18446744073709551615',
    f: 1.5,
  };
  const pick = (r) => ({ id: r.id, a: r.a, d: r.d, j: r.j, b: r.b, big: r.big, f: r.f });
  // The binary protocol (execute) and the text protocol (query): the
  // JSON column parsed by its type code, the rest typed.
  const [bin] = await conn.execute('SELECT * FROM m WHERE id = ?', [1]);
  check('binary row', pick(bin[0]), want);
  const [text] = await conn.query('SELECT * FROM m WHERE id = 1');
  check('text row', pick(text[0]), want);
  check('datetime', [bin[0].t.getTime(), text[0].t.getTime()], [at.getTime(), at.getTime()]);
  const [[row]] = await conn.query("SELECT CONCAT(j) AS c, JSON_EXTRACT(j, '$.k[1]') AS e FROM m WHERE id = 1");
  check('json expressions are text', row.c.replace(/\s/g, ''), '{"k":[1,2]}');
  const [many] = await conn.execute('SELECT a FROM m WHERE id IN (?, ?) ORDER BY id', [2, 3]);
  check('in list', many.map((r) => r.a), ['y', 'z']);
  await assert.rejects(conn.query('INSERT INTO m (id) VALUES (1)'), (e) => e.errno === 1062 && e.sqlState === '23000');
  await assert.rejects(conn.query('SELECT * FROM no_such'), (e) => e.errno === 1146);
  await conn.end();
}

async function orm() {
  const s = new Sequelize(DB, 'root', '', { host, port, dialect: 'mysql', logging: false });
  const User = s.define(
    'User',
    {
      name: { type: DataTypes.STRING, allowNull: false, unique: true },
      age: DataTypes.INTEGER,
      meta: DataTypes.JSON,
      score: DataTypes.DECIMAL(8, 3),
      born: DataTypes.DATEONLY,
      flag: { type: DataTypes.BOOLEAN, defaultValue: true },
      kind: DataTypes.ENUM('a', 'b'),
    },
    { indexes: [{ fields: ['age', 'name'] }] }
  );
  const Post = s.define('Post', { title: DataTypes.STRING(100), views: { type: DataTypes.INTEGER, defaultValue: 0 } });
  User.hasMany(Post);
  Post.belongsTo(User);
  await s.sync({ force: true });
  await User.bulkCreate([
    { name: 'ann', age: 30, meta: { x: 1 }, score: '1.500', born: '1990-01-02', kind: 'a' },
    { name: 'bob', age: 25 },
    { name: 'cy', age: 35 },
  ]);
  const ann = await User.findOne({ where: { name: 'ann' } });
  await Post.create({ title: 'p1', UserId: ann.id });
  await Post.create({ title: 'p2', UserId: ann.id });
  const users = await User.findAll({ include: Post, order: [['id', 'ASC'], [Post, 'id', 'ASC']] });
  check(
    'include',
    users.map((u) => [u.name, u.age, u.flag, u.meta, u.score, u.born, u.Posts.map((p) => p.title)]),
    [
      ['ann', 30, true, { x: 1 }, '1.500', '1990-01-02', ['p1', 'p2']],
      ['bob', 25, true, null, null, null, []],
      ['cy', 35, true, null, null, null, []],
    ]
  );
  check('count', await User.count({ where: { age: { [Op.gt]: 26 } } }), 2);
  check('update', (await User.update({ age: 31 }, { where: { name: 'ann' } }))[0], 1);
  check('update unchanged', (await User.update({ age: 31 }, { where: { name: 'ann' } }))[0], 0);
  const page = await User.findAndCountAll({ limit: 2, offset: 1, order: [['name', 'ASC']] });
  check('findAndCountAll', [page.count, page.rows.map((u) => u.name)], [3, ['bob', 'cy']]);
  check(
    'group by',
    await Post.findAll({ attributes: ['UserId', [s.fn('COUNT', s.col('id')), 'n']], group: ['UserId'], raw: true }),
    [{ UserId: ann.id, n: 2 }]
  );
  await s.transaction(async (t) => {
    await User.create({ name: 'dee', age: 1 }, { transaction: t });
  });
  await assert.rejects(
    s.transaction(async (t) => {
      await User.create({ name: 'eve' }, { transaction: t });
      await User.create({ name: 'ann' }, { transaction: t });
    }),
    (e) => e.name === 'SequelizeUniqueConstraintError' && e.parent.errno === 1062
  );
  check('rolled back', await User.count(), 4);
  // A nested transaction (a savepoint) rolled back after a write: the
  // row written after the savepoint is gone, the outer transaction's
  // update commits.
  const t = await s.transaction();
  await User.update({ age: 99 }, { where: { name: 'bob' }, transaction: t });
  await assert.rejects(
    s.transaction({ transaction: t }, async (t2) => {
      await User.create({ name: 'zed' }, { transaction: t2 });
      await User.update({ age: 1 }, { where: { name: 'bob' }, transaction: t2 });
      throw new Error('inner');
    }),
    /inner/
  );
  await t.commit();
  check('savepoint', await User.count({ where: { name: 'zed' } }), 0);
  check('savepoint keeps', (await User.findOne({ where: { name: 'bob' } })).age, 99);
  const [bob] = await User.upsert({ name: 'bob', age: 50 });
  check('upsert', bob.age, 50);
  check(
    'replacements',
    await s.query('SELECT name FROM Users WHERE age > :a ORDER BY name', { replacements: { a: 20 }, type: QueryTypes.SELECT }),
    [{ name: 'ann' }, { name: 'bob' }, { name: 'cy' }]
  );
  await User.destroy({ where: { name: 'dee' } });
  // sync({alter}): Sequelize reads the table back and alters it.
  const User2 = s.define(
    'User',
    {
      name: { type: DataTypes.STRING(80), allowNull: false, unique: true },
      age: DataTypes.BIGINT,
      nick: DataTypes.STRING,
      meta: DataTypes.JSON,
      score: DataTypes.DECIMAL(10, 3),
      born: DataTypes.DATEONLY,
      flag: DataTypes.BOOLEAN,
      kind: DataTypes.ENUM('a', 'b', 'c'),
    },
    { indexes: [{ fields: ['nick'] }] }
  );
  await User2.sync({ alter: true });
  const qi = s.getQueryInterface();
  const described = await qi.describeTable('Users');
  check(
    'describeTable',
    ['id', 'name', 'age', 'nick', 'score', 'kind'].map((c) => [c, described[c].type, described[c].allowNull]),
    [
      ['id', 'INT(11)', false],
      ['name', 'VARCHAR(80)', false],
      ['age', 'BIGINT(20)', true],
      ['nick', 'VARCHAR(255)', true],
      ['score', 'DECIMAL(10,3)', true],
      ['kind', "ENUM('a','b','c')", true],
    ]
  );
  const indexes = (await qi.showIndex('Users')).map((i) => [i.name, i.unique, i.fields.map((f) => f.attribute)]);
  check('index on nick', indexes.filter((i) => i[0] === 'users_nick'), [['users_nick', false, ['nick']]]);
  check('primary', indexes[0], ['PRIMARY', true, ['id']]);
  const fks = await qi.getForeignKeyReferencesForTable('Posts');
  check(
    'foreign keys',
    fks.map((f) => [f.columnName, f.referencedTableName, f.referencedColumnName]),
    [['UserId', 'Users', 'id']]
  );
  check('data kept', (await User2.findOne({ where: { name: 'ann' } })).meta, { x: 1 });
  await s.drop();
  check('dropped', (await qi.showAllTables()).filter((t) => t !== 'm'), []);
  await s.close();
}

(async () => {
  await driver();
  console.log('mysql2: ok');
  await orm();
  console.log('sequelize: ok');
  console.log('drivers-node: ok');
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
