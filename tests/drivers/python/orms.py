"""Python's two big ORMs against a MySQL-protocol server: SQLAlchemy 2.0
(Core, the ORM, reflection) and Django 5.2 (its own apps' migrations, the
ORM's queries, a second migration that renames and alters, migrating back
to zero), both over PyMySQL. Every check compares with values the program
knows; the first that fails stops it with its name. Prints
`drivers-python: ok` at the end. The same program passes against
MariaDB 10.11.

    python3 orms.py --host 127.0.0.1 --port 3306

Django runs in child processes (one per migration step: a model class is
defined once per process). Django and SQLAlchemy come from PYTHONPATH
(`.ci/run` installs them into target/ci-tools/python).
"""

import argparse
import datetime
import decimal
import os
import subprocess
import sys
import tempfile
import textwrap
import uuid

DATABASE = "orms"


def check(what, got, want):
    if got != want:
        raise SystemExit(f"drivers-python: {what}: got {got!r}, want {want!r}")


def connect_root(host, port):
    import pymysql

    return pymysql.connect(host=host, port=port, user="root", autocommit=True)


# ---------------------------------------------------------------- SQLAlchemy


def sqlalchemy_checks(host, port):
    from sqlalchemy import (
        JSON,
        Boolean,
        Date,
        DateTime,
        Enum,
        Float,
        ForeignKey,
        Index,
        LargeBinary,
        Numeric,
        String,
        Text,
        UniqueConstraint,
        create_engine,
        func,
        inspect,
        select,
        update,
    )
    from sqlalchemy.exc import IntegrityError
    from sqlalchemy.orm import (
        DeclarativeBase,
        Mapped,
        Session,
        joinedload,
        mapped_column,
        relationship,
        selectinload,
    )

    root = connect_root(host, port)
    with root.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DATABASE}_sa")
        c.execute(f"CREATE DATABASE {DATABASE}_sa")
    engine = create_engine(f"mysql+pymysql://root@{host}:{port}/{DATABASE}_sa")

    class Base(DeclarativeBase):
        pass

    class User(Base):
        __tablename__ = "users"
        id: Mapped[int] = mapped_column(primary_key=True)
        name: Mapped[str] = mapped_column(String(50), index=True)
        email: Mapped[str] = mapped_column(String(100), unique=True)
        created: Mapped[datetime.datetime] = mapped_column(
            DateTime, server_default=func.now()
        )
        balance: Mapped[decimal.Decimal] = mapped_column(Numeric(10, 2), default=0)
        active: Mapped[bool] = mapped_column(Boolean, default=True)
        kind = mapped_column(Enum("a", "b", name="kind"), nullable=True)
        data = mapped_column(JSON, nullable=True)
        blob = mapped_column(LargeBinary, nullable=True)
        score = mapped_column(Float, nullable=True)
        born = mapped_column(Date, nullable=True)
        posts: Mapped[list["Post"]] = relationship(
            back_populates="user", cascade="all, delete-orphan"
        )

    class Post(Base):
        __tablename__ = "posts"
        id: Mapped[int] = mapped_column(primary_key=True)
        user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
        title: Mapped[str] = mapped_column(String(200))
        body: Mapped[str] = mapped_column(Text)
        user: Mapped[User] = relationship(back_populates="posts")
        __table_args__ = (
            UniqueConstraint("user_id", "title"),
            Index("ix_title_id", "title", "id"),
        )

    Base.metadata.create_all(engine)
    with Session(engine) as s:
        for i in range(5):
            u = User(
                name=f"u{i}",
                email=f"u{i}@x",
                kind="a",
                data={"k": [i, 2]},
                blob=b"\x00\x01\xff",
                score=1.5,
                born=datetime.date(2000, 1, i + 1),
            )
            u.posts = [Post(title=f"t{j}", body="b" * j) for j in range(3)]
            s.add(u)
        s.commit()
        users = s.scalars(
            select(User).options(selectinload(User.posts)).order_by(User.id)
        ).all()
        check(
            "sqlalchemy selectinload",
            [(u.id, u.name, len(u.posts), u.balance, u.active, u.data) for u in users],
            [
                (i + 1, f"u{i}", 3, decimal.Decimal("0.00"), True, {"k": [i, 2]})
                for i in range(5)
            ],
        )
        check("sqlalchemy server default", all(u.created for u in users), True)
        check("sqlalchemy blob", users[0].blob, b"\x00\x01\xff")
        joined = (
            s.scalars(
                select(User)
                .options(joinedload(User.posts))
                .where(User.name.like("u%"))
                .order_by(User.id)
            )
            .unique()
            .all()
        )
        check("sqlalchemy joinedload", [len(u.posts) for u in joined], [3] * 5)
        u = s.get(User, 1)
        u.balance = decimal.Decimal("3.50")
        u.data = {"z": 1}
        s.commit()
        s.execute(update(User).where(User.id == 3).values(score=User.score * 2))
        s.commit()
        s.delete(s.get(User, 2))
        s.commit()
        check("sqlalchemy cascade", s.scalar(select(func.count()).select_from(Post)), 12)
        check(
            "sqlalchemy join group by",
            s.execute(
                select(User.name, func.count(Post.id))
                .join(Post)
                .group_by(User.name)
                .order_by(User.name)
            ).all(),
            [("u0", 3), ("u2", 3), ("u3", 3), ("u4", 3)],
        )
        check(
            "sqlalchemy updated",
            s.execute(select(User.balance, User.data).where(User.id == 1)).one(),
            (decimal.Decimal("3.50"), {"z": 1}),
        )
        check("sqlalchemy update expression", s.get(User, 3).score, 3.0)
        s.add(Post(user_id=1, title="t0", body=""))
        try:
            s.commit()
            raise SystemExit("drivers-python: sqlalchemy duplicate key not refused")
        except IntegrityError as e:
            check("sqlalchemy duplicate key error", e.orig.args[0], 1062)
            s.rollback()
        # begin_nested() is a SAVEPOINT: rolled back after writes, they are
        # gone and the outer transaction's write commits.
        s.get(User, 1).name = "u0 renamed"
        nested = s.begin_nested()
        s.add(User(id=40, name="u40", email="u40@x", balance=decimal.Decimal("1.00")))
        s.get(User, 3).name = "u2 renamed"
        s.flush()
        nested.rollback()
        s.commit()
        check(
            "sqlalchemy begin_nested",
            s.execute(select(User.id, User.name).where(User.id.in_([1, 3, 40])).order_by(User.id)).all(),
            [(1, "u0 renamed"), (3, "u2")],
        )
    insp = inspect(engine)
    check("sqlalchemy table names", insp.get_table_names(), ["posts", "users"])
    columns = {c["name"]: c for c in insp.get_columns("users")}
    check(
        "sqlalchemy reflected types",
        [str(columns[n]["type"]) for n in ("id", "name", "balance", "active", "born")],
        ["INTEGER", "VARCHAR(50)", "DECIMAL(10, 2)", "TINYINT", "DATE"],
    )
    check("sqlalchemy autoincrement", columns["id"]["autoincrement"], True)
    check("sqlalchemy pk", insp.get_pk_constraint("posts")["constrained_columns"], ["id"])
    fks = insp.get_foreign_keys("posts")
    check(
        "sqlalchemy foreign key",
        [(f["constrained_columns"], f["referred_table"], f["referred_columns"], f["options"]) for f in fks],
        [(["user_id"], "users", ["id"], {"ondelete": "CASCADE"})],
    )
    indexes = sorted(
        (i["name"], i["column_names"], i["unique"]) for i in insp.get_indexes("users")
    )
    check(
        "sqlalchemy indexes",
        indexes,
        [("email", ["email"], True), ("ix_users_name", ["name"], False)],
    )
    check(
        "sqlalchemy unique constraints",
        [u["column_names"] for u in insp.get_unique_constraints("posts")],
        [["user_id", "title"]],
    )
    Base.metadata.drop_all(engine)
    check("sqlalchemy drop_all", inspect(engine).get_table_names(), [])
    engine.dispose()


# -------------------------------------------------------------------- Django

MODELS_1 = """
from django.db import models

class Author(models.Model):
    name = models.CharField(max_length=100, db_index=True)
    email = models.EmailField(unique=True)
    born = models.DateField(null=True)
    rating = models.DecimalField(max_digits=5, decimal_places=2, default=0)
    meta = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    uid = models.UUIDField(null=True)
    active = models.BooleanField(default=True)

class Tag(models.Model):
    name = models.SlugField(unique=True)

class Book(models.Model):
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")
    title = models.CharField(max_length=200)
    pages = models.PositiveIntegerField(default=0)
    tags = models.ManyToManyField(Tag, blank=True)

    class Meta:
        unique_together = [("author", "title")]
        indexes = [models.Index(fields=["title", "pages"], name="book_title_pages_idx")]
"""

# A TestCase of the first step's models (`django_step_1` runs it).
DJANGO_TESTS = """
from django.test import TestCase

from shop.models import Author, Book


class ShopTests(TestCase):
    @classmethod
    def setUpTestData(cls):
        cls.t0 = Author.objects.create(name="T0", email="t0@x")
        Book.objects.create(author=cls.t0, title="kept")

    def test_a_writes(self):
        Author.objects.create(name="T1", email="t1@x")
        Author.objects.filter(pk=self.t0.pk).update(name="T0 renamed")
        Book.objects.filter(author=self.t0).delete()
        self.assertEqual(Author.objects.filter(name__startswith="T").count(), 2)

    def test_b_sees_none_of_a(self):
        self.assertEqual(
            list(Author.objects.filter(name__startswith="T").values_list("name", flat=True)),
            ["T0"],
        )
        self.assertEqual(Book.objects.filter(author=self.t0).count(), 1)
        Author.objects.create(name="T2", email="t0b@x")

    def test_c_unique_value_given_back(self):
        # test_b's T2 took an email; it is free again.
        Author.objects.create(name="T3", email="t0b@x")
        self.assertEqual(Author.objects.filter(email="t0b@x").count(), 1)
"""

# What 0002 (below) leaves: the models the second step's queries use.
MODELS_2 = """
from django.db import models

class Writer(models.Model):
    name = models.CharField(max_length=150)
    mail = models.EmailField(unique=True)
    born = models.DateField(null=True)
    rating = models.DecimalField(max_digits=7, decimal_places=3, default=0, null=True)
    meta = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    uid = models.UUIDField(null=True)
    active = models.BooleanField(default=True)
    bio = models.TextField(default="")

    class Meta:
        indexes = [models.Index(fields=["born"], name="born_idx")]
        constraints = [
            models.CheckConstraint(condition=models.Q(rating__gte=0), name="rating_pos")
        ]

class Tag(models.Model):
    name = models.SlugField(unique=True)

class Book(models.Model):
    author = models.ForeignKey(
        Writer, on_delete=models.PROTECT, related_name="books", null=True
    )
    title = models.CharField(max_length=200)
    pages = models.IntegerField(default=0)
    isbn = models.CharField(max_length=13, null=True, unique=True)
    tags = models.ManyToManyField(Tag, blank=True)

    class Meta:
        unique_together = [("title", "author")]
"""

# A second migration written out, so that it does not depend on the
# questions makemigrations asks about renames.
MIGRATION_2 = """
from django.db import migrations, models
import django.db.models.deletion

class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]
    operations = [
        migrations.RenameModel("Author", "Writer"),
        migrations.RenameField("Writer", "email", "mail"),
        migrations.AlterField("Writer", "name", models.CharField(max_length=150)),
        migrations.AlterField(
            "Writer",
            "rating",
            models.DecimalField(max_digits=7, decimal_places=3, default=0, null=True),
        ),
        migrations.AddField("Writer", "bio", models.TextField(default="")),
        migrations.AddIndex("Writer", models.Index(fields=["born"], name="born_idx")),
        migrations.AddConstraint(
            "Writer",
            models.CheckConstraint(condition=models.Q(rating__gte=0), name="rating_pos"),
        ),
        migrations.AlterField("Book", "pages", models.IntegerField(default=0)),
        migrations.AlterField(
            "Book",
            "author",
            models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="books",
                to="shop.writer",
            ),
        ),
        migrations.AddField(
            "Book", "isbn", models.CharField(max_length=13, null=True, unique=True)
        ),
        migrations.RemoveIndex("Book", "book_title_pages_idx"),
        migrations.AlterUniqueTogether("Book", {("title", "author")}),
    ]
"""


def django_setup(host, port, project):
    sys.path.insert(0, project)
    import pymysql

    # Django's MySQL backend asks for mysqlclient; PyMySQL stands in for it.
    pymysql.version_info = (2, 2, 7, "final", 0)
    pymysql.install_as_MySQLdb()
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="orms",
        USE_TZ=False,
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.sessions",
            "django.contrib.admin",
            "django.contrib.messages",
            "shop",
        ],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.mysql",
                "NAME": DATABASE,
                "USER": "root",
                "HOST": host,
                "PORT": str(port),
            }
        },
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()


def constraints(table):
    from django.db import connection

    with connection.cursor() as c:
        return connection.introspection.get_constraints(c, table)


def django_step_1():
    from django.core.management import call_command
    from django.db import IntegrityError, connection, transaction
    from django.db.models import (
        Avg,
        Case,
        Count,
        Exists,
        F,
        Max,
        OuterRef,
        Q,
        Subquery,
        Sum,
        Value,
        When,
        Window,
    )
    from django.db.models import CharField as Chars
    from django.db.models.functions import Concat, ExtractYear, Lower, Rank, TruncMonth
    from django.contrib.auth.models import User
    from django.core.paginator import Paginator

    call_command("makemigrations", "shop", verbosity=0)
    call_command("migrate", verbosity=0)
    from shop.models import Author, Book, Tag

    admin = User.objects.create_superuser("admin", "a@x", "pw")
    check("django auth", User.objects.get(username="admin").check_password("pw"), True)
    check("django auth pk", admin.pk, 1)
    for i in range(4):
        a = Author.objects.create(
            name=f"A{i}",
            email=f"a{i}@x",
            born=datetime.date(1980 + i, 3, 4),
            rating=decimal.Decimal("1.25") * i,
            meta={"i": i, "l": [1, 2]},
            uid=uuid.UUID(int=i),
        )
        for j in range(i + 1):
            b = Book.objects.create(author=a, title=f"B{j}", pages=100 * j)
            t, _ = Tag.objects.get_or_create(name=f"t{j}")
            b.tags.add(t)
    by_id = Author.objects.order_by("id")
    check(
        "django annotate count",
        list(Author.objects.annotate(n=Count("books")).order_by("-n").values_list("name", "n")),
        [("A3", 4), ("A2", 3), ("A1", 2), ("A0", 1)],
    )
    check(
        "django json key",
        list(by_id.filter(meta__i__gte=2).values_list("name", flat=True)),
        ["A2", "A3"],
    )
    check(
        "django json contains",
        list(by_id.filter(meta__l__contains=1).values_list("name", flat=True)),
        ["A0", "A1", "A2", "A3"],
    )
    check(
        "django aggregate",
        Book.objects.aggregate(Sum("pages"), Avg("pages"), Max("pages")),
        {"pages__sum": 1000, "pages__avg": 100.0, "pages__max": 300},
    )
    check(
        "django m2m join",
        list(
            Book.objects.filter(tags__name="t1")
            .select_related("author")
            .order_by("author__name")
            .values_list("author__name", "title")
        ),
        [("A1", "B1"), ("A2", "B1"), ("A3", "B1")],
    )
    check(
        "django dates",
        list(by_id.annotate(m=TruncMonth("born"), y=ExtractYear("born")).values_list("m", "y")),
        [(datetime.date(1980 + i, 3, 1), 1980 + i) for i in range(4)],
    )
    latest = Book.objects.filter(author=OuterRef("pk")).order_by("-pages").values("title")[:1]
    check(
        "django subquery",
        list(by_id.annotate(lb=Subquery(latest)).values_list("name", "lb")),
        [("A0", "B0"), ("A1", "B1"), ("A2", "B2"), ("A3", "B3")],
    )
    check(
        "django exists",
        list(
            by_id.filter(
                Exists(Book.objects.filter(author=OuterRef("pk"), pages__gt=150))
            ).values_list("name", flat=True)
        ),
        ["A2", "A3"],
    )
    check(
        "django q",
        Author.objects.filter(Q(name__icontains="a1") | Q(rating__gt=2)).count(),
        3,
    )
    Author.objects.filter(name="A1").update(rating=F("rating") + 1)
    check(
        "django f update",
        list(by_id.values_list("rating", flat=True)),
        [decimal.Decimal(x) for x in ("0.00", "2.25", "2.50", "3.75")],
    )
    check(
        "django concat",
        list(
            by_id.annotate(
                full=Concat("name", Value("-"), Lower("email"), output_field=Chars())
            ).values_list("full", flat=True)
        ),
        [f"A{i}-a{i}@x" for i in range(4)],
    )
    check("django uuid", Author.objects.get(uid=uuid.UUID(int=2)).name, "A2")
    check(
        "django case when",
        list(
            by_id.annotate(
                size=Case(When(books__pages__gte=300, then=Value("big")), default=Value("small"))
            )
            .values_list("name", "size")
            .distinct()
            .order_by("name", "size")
        ),
        [("A0", "small"), ("A1", "small"), ("A2", "small"), ("A3", "big"), ("A3", "small")],
    )
    check(
        "django window",
        list(
            Book.objects.annotate(r=Window(Rank(), partition_by="author", order_by=F("pages").desc()))
            .filter(author__name="A2")
            .order_by("r")
            .values_list("title", "r")
        ),
        [("B2", 1), ("B1", 2), ("B0", 3)],
    )
    check(
        "django union",
        sorted(
            Author.objects.filter(name="A0")
            .values_list("name", flat=True)
            .union(Tag.objects.filter(name="t3").values_list("name", flat=True))
        ),
        ["A0", "t3"],
    )
    page = Paginator(Book.objects.order_by("id"), 4).page(2)
    check("django paginator", [b.title for b in page], ["B1", "B2", "B0", "B1"])
    check("django iterator", sum(1 for _ in Book.objects.iterator(chunk_size=3)), 10)
    Book.objects.bulk_create([Book(author_id=1, title=f"bulk{k}") for k in range(5)])
    first = Book.objects.order_by("id").first()
    Book.objects.bulk_update([Book(id=first.id, author_id=1, title="ren", pages=7)], ["title", "pages"])
    check("django bulk", (Book.objects.count(), Book.objects.get(pk=first.id).pages), (15, 7))
    obj, created = Tag.objects.update_or_create(name="t0", defaults={"name": "t0"})
    check("django update_or_create", created, False)
    Author.objects.filter(name="A3").delete()
    check("django cascade", (Book.objects.count(), Tag.objects.count()), (11, 4))
    try:
        with transaction.atomic():
            Author.objects.create(name="x", email="a0@x")
        raise SystemExit("drivers-python: django duplicate key not refused")
    except IntegrityError as e:
        check("django duplicate key", e.args[0], 1062)
    with transaction.atomic():
        a = Author.objects.select_for_update().get(name="A0")
        a.name = "A0b"
        a.save()
        # A savepoint around a create that fails (get_or_create's
        # pattern), on the primary key and on a UNIQUE column: the failed
        # INSERT took nothing, the savepoint rolls back to it, and the
        # outer transaction keeps its UPDATE.
        for dup in (dict(id=a.id, email="dup@x"), dict(email="a1@x")):
            try:
                with transaction.atomic():
                    Author.objects.create(name="dup", **dup)
                raise SystemExit(f"drivers-python: django duplicate {dup} not refused")
            except IntegrityError as e:
                check("django duplicate in a savepoint", e.args[0], 1062)
        Tag.objects.get_or_create(name="t1")
        # A nested atomic() whose block raises after writes: its savepoint
        # is rolled back, the outer block's writes stay.
        try:
            with transaction.atomic():
                Author.objects.create(name="gone", email="gone@x")
                Author.objects.filter(name="A1").update(name="A1 renamed")
                raise ValueError("inner")
        except ValueError:
            pass
        check("django nested atomic", Author.objects.filter(name__in=["gone", "A1 renamed"]).count(), 0)
    check(
        "django savepoint",
        list(by_id.values_list("name", flat=True)),
        ["A0b", "A1", "A2"],
    )
    check(
        "django raw",
        [a.name for a in Author.objects.raw("SELECT * FROM shop_author WHERE id > %s ORDER BY id", [1])],
        ["A1", "A2"],
    )
    check("django explain", "shop_author" in Author.objects.filter(pk=1).explain(), True)
    found = constraints("shop_book")
    check(
        "django constraints",
        sorted(
            (sorted(v["columns"]), v["unique"], bool(v["foreign_key"]), v["check"])
            for k, v in found.items()
            # An index Django adds for a foreign key where the engine is not
            # InnoDB (Skarv's ndbcluster) is left out.
            if v["unique"] or v["foreign_key"] or v["check"] or k == "book_title_pages_idx"
        ),
        [
            (["author_id"], False, True, False),
            (["author_id", "title"], True, False, False),
            (["id"], True, False, False),
            (["pages"], False, False, True),
            (["pages", "title"], False, False, False),
        ],
    )
    with connection.cursor() as c:
        check(
            "django table names",
            sorted(t for t in connection.introspection.table_names(c) if t.startswith("shop_")),
            ["shop_author", "shop_book", "shop_book_tags", "shop_tag"],
        )
    # Django's TestCase: a transaction around the class (its test data)
    # and a savepoint around each test, rolled back after it, writes and
    # all. The next test sees none of the last one's writes; after the
    # class, nothing of it is left.
    import unittest

    from shop.tests import ShopTests

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ShopTests)
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(suite)
    check("django TestCase", (result.testsRun, len(result.failures), len(result.errors)), (3, 0, 0))
    check("django TestCase left", Author.objects.filter(name__startswith="T").count(), 0)


def django_step_2():
    from django.core.management import call_command
    from django.db.models import ProtectedError

    call_command("migrate", verbosity=0)
    from shop.models import Book, Writer

    check("django renamed data", Writer.objects.get(mail="a1@x").name, "A1")
    check("django added default", Writer.objects.get(mail="a1@x").bio, "")
    writer = constraints("shop_writer")
    check("django check added", writer["rating_pos"]["check"], True)
    check("django index added", writer["born_idx"]["columns"], ["born"])
    book = constraints("shop_book")
    check(
        "django column check dropped",
        [k for k, v in book.items() if v["check"]],
        [],
    )
    check(
        "django foreign key moved",
        [v["foreign_key"] for v in book.values() if v["foreign_key"]],
        [("shop_writer", "id")],
    )
    check(
        "django unique keys",
        sorted(sorted(v["columns"]) for v in book.values() if v["unique"] and not v["primary_key"]),
        [["author_id", "title"], ["isbn"]],
    )
    check("django index removed", "book_title_pages_idx" in book, False)
    try:
        Writer.objects.get(mail="a2@x").delete()
        raise SystemExit("drivers-python: django PROTECT did not protect")
    except ProtectedError:
        pass
    Book.objects.create(title="free", isbn="123")
    check("django null foreign key", Book.objects.filter(author__isnull=True).count(), 1)
    # Migrating back makes author NOT NULL again: no row may lack one.
    Book.objects.filter(author__isnull=True).delete()
    w = Writer.objects.create(name="n", mail="n@x", rating=decimal.Decimal("1.5"))
    check("django decimal altered", Writer.objects.get(pk=w.pk).rating, decimal.Decimal("1.500"))


def django_step_3():
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", "shop", "0001", verbosity=0)
    book = constraints("shop_book")
    check(
        "django back to 0001",
        sorted(
            (v["columns"], bool(v["check"]), v["foreign_key"])
            for v in book.values()
            if v["check"] or v["foreign_key"]
        ),
        [(["author_id"], False, ("shop_author", "id")), (["pages"], True, None)],
    )
    call_command("migrate", "shop", "zero", verbosity=0)
    with connection.cursor() as c:
        check(
            "django zero",
            [t for t in connection.introspection.table_names(c) if t.startswith("shop_")],
            [],
        )


def django_checks(host, port):
    root = connect_root(host, port)
    with root.cursor() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        c.execute(f"CREATE DATABASE {DATABASE}")
    with tempfile.TemporaryDirectory() as project:
        app = os.path.join(project, "shop")
        os.makedirs(os.path.join(app, "migrations"))
        for name in ("__init__.py", "migrations/__init__.py"):
            open(os.path.join(app, name), "w").close()

        def write(name, text):
            with open(os.path.join(app, name), "w") as f:
                f.write(textwrap.dedent(text))

        for step in (1, 2, 3):
            if step == 1:
                write("models.py", MODELS_1)
                write("tests.py", DJANGO_TESTS)
            if step == 2:
                write("models.py", MODELS_2)
                write("migrations/0002_changes.py", MIGRATION_2)
            if step == 3:
                write("models.py", "")
            ran = subprocess.run(
                [sys.executable, __file__, "--host", host, "--port", str(port),
                 "--django-step", str(step), "--project", project],
                capture_output=True,
                text=True,
            )
            if ran.returncode != 0 or f"django step {step}: ok" not in ran.stdout:
                raise SystemExit(
                    f"drivers-python: django step {step} failed\n{ran.stdout}\n{ran.stderr}"
                )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--django-step", type=int)
    parser.add_argument("--project")
    args = parser.parse_args()
    if args.django_step:
        django_setup(args.host, args.port, args.project)
        {1: django_step_1, 2: django_step_2, 3: django_step_3}[args.django_step]()
        print(f"django step {args.django_step}: ok")
        return
    sqlalchemy_checks(args.host, args.port)
    print("sqlalchemy: ok")
    django_checks(args.host, args.port)
    print("django: ok")
    print("drivers-python: ok")


if __name__ == "__main__":
    main()
