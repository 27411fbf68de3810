package skarv.drivers;

import jakarta.persistence.CascadeType;
import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.EnumType;
import jakarta.persistence.Enumerated;
import jakarta.persistence.FetchType;
import jakarta.persistence.GeneratedValue;
import jakarta.persistence.GenerationType;
import jakarta.persistence.Id;
import jakarta.persistence.Index;
import jakarta.persistence.JoinTable;
import jakarta.persistence.LockModeType;
import jakarta.persistence.Lob;
import jakarta.persistence.ManyToMany;
import jakarta.persistence.ManyToOne;
import jakarta.persistence.OneToMany;
import jakarta.persistence.Table;
import jakarta.persistence.Version;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.hibernate.SessionFactory;
import org.hibernate.cfg.Configuration;

/**
 * Hibernate ORM 7 over MySQL Connector/J against a MySQL server (Skarv's SQL
 * node, or MariaDB as the reference, with Hibernate's MariaDB dialect): the
 * schema made from the entities ({@code hbm2ddl} create-only, then update and
 * validate, which read it back through {@code DatabaseMetaData}), identity and
 * table-generated keys, batched inserts of a cascade, JPQL with joins, fetch
 * joins, paging, GROUP BY, subqueries, CASE, a many-to-many, a native query,
 * LOBs, optimistic locking by {@code @Version}, a pessimistic lock ({@code
 * SELECT … FOR UPDATE OF}), bulk update and delete, a rolled back
 * transaction, orphan removal and a duplicate key. Prints "drivers-hibernate:
 * ok", or names each failing check and exits non-zero.
 *
 * <p>Usage: {@code mvn -q compile exec:java -Ddrivers.main=skarv.drivers.HibernateChecks
 * -Dexec.args="HOST PORT"}.
 */
public final class HibernateChecks {
    private HibernateChecks() {}

    static final String DB = "drivers_hibernate";

    @Entity(name = "Dept")
    @Table(name = "dept")
    public static class Dept {
        @Id @GeneratedValue(strategy = GenerationType.IDENTITY) public Long id;
        @Column(nullable = false, unique = true, length = 40) public String name;
        @OneToMany(mappedBy = "dept", cascade = CascadeType.ALL, orphanRemoval = true)
        public List<Emp> emps = new ArrayList<>();
    }

    public enum Kind { FULL, PART }

    @Entity(name = "Emp")
    @Table(name = "emp", indexes = @Index(name = "emp_name_idx", columnList = "name"))
    public static class Emp {
        @Id @GeneratedValue(strategy = GenerationType.IDENTITY) public Long id;
        public String name;
        @Column(precision = 12, scale = 2) public BigDecimal salary;
        public LocalDate hired;
        public LocalDateTime updated;
        @Enumerated(EnumType.STRING) public Kind kind;
        @Lob @Column(length = 100000) public String bio;
        @Version public int version;
        @ManyToOne(fetch = FetchType.LAZY) public Dept dept;
        @ManyToMany @JoinTable(name = "emp_skill") public Set<Skill> skills = new HashSet<>();
    }

    @Entity(name = "Skill")
    @Table(name = "skill")
    public static class Skill {
        @Id public String code;
        public int level;
    }

    @Entity(name = "Counter")
    @Table(name = "counter")
    public static class Counter {
        @Id @GeneratedValue(strategy = GenerationType.TABLE) public Long id;
        public String label;
    }

    static int failed = 0;

    static void check(String what, Object got, Object want) {
        if (!String.valueOf(got).equals(String.valueOf(want))) {
            System.out.println("drivers-hibernate: " + what + ": got " + got + ", want " + want);
            failed++;
        }
    }

    public static void main(String[] args) throws Exception {
        Logger.getLogger("org.hibernate").setLevel(Level.SEVERE);
        String host = args.length > 0 ? args[0] : "127.0.0.1";
        String port = args.length > 1 ? args[1] : "3306";
        String server = "jdbc:mysql://" + host + ":" + port + "/";
        boolean mariadb;
        try (Connection c = DriverManager.getConnection(server, "root", "");
             Statement s = c.createStatement()) {
            mariadb = c.getMetaData().getDatabaseProductVersion().contains("MariaDB");
            s.execute("DROP DATABASE IF EXISTS " + DB);
            s.execute("CREATE DATABASE " + DB);
        }
        String url = server + DB + "?rewriteBatchedStatements=true";
        for (String mode : new String[] {"create-only", "update", "validate"}) {
            Configuration cfg = new Configuration()
                    .addAnnotatedClass(Dept.class)
                    .addAnnotatedClass(Emp.class)
                    .addAnnotatedClass(Skill.class)
                    .addAnnotatedClass(Counter.class)
                    .setProperty("hibernate.connection.url", url)
                    .setProperty("hibernate.connection.username", "root")
                    .setProperty("hibernate.connection.password", "")
                    .setProperty("hibernate.hbm2ddl.auto", mode)
                    .setProperty("hibernate.jdbc.batch_size", "20")
                    .setProperty("hibernate.order_inserts", "true");
            if (mariadb) {
                // MariaDB says so, and has no FOR UPDATE OF.
                cfg.setProperty("hibernate.dialect", "org.hibernate.dialect.MariaDBDialect");
            }
            try (SessionFactory sf = cfg.buildSessionFactory()) {
                if (mode.equals("create-only")) {
                    run(sf);
                }
            } catch (Exception e) {
                Throwable cause = e;
                while (cause.getCause() != null) {
                    cause = cause.getCause();
                }
                check("schema " + mode, e + " (" + cause + ")", "no exception");
            }
        }
        try (Connection c = DriverManager.getConnection(server, "root", "");
             Statement s = c.createStatement()) {
            s.execute("DROP DATABASE " + DB);
        }
        if (failed > 0) {
            System.out.println("drivers-hibernate: " + failed + " checks failed");
            System.exit(1);
        }
        System.out.println("drivers-hibernate: ok");
    }

    static void run(SessionFactory sf) {
        sf.inTransaction(s -> {
            Skill java = new Skill();
            java.code = "java";
            java.level = 3;
            s.persist(java);
            Skill sql = new Skill();
            sql.code = "sql";
            sql.level = 2;
            s.persist(sql);
            for (int d = 0; d < 3; d++) {
                Dept dept = new Dept();
                dept.name = "d" + d;
                for (int i = 0; i < 30; i++) {
                    Emp e = new Emp();
                    e.name = "e" + d + "_" + i;
                    e.salary = new BigDecimal(1000 + i + ".50");
                    e.hired = LocalDate.of(2020, 1 + i % 12, 1 + i % 28);
                    e.updated = LocalDateTime.of(2024, 2, 29, 12, 0, 1);
                    e.kind = i % 2 == 0 ? Kind.FULL : Kind.PART;
                    e.bio = "x".repeat(i * 500);
                    e.dept = dept;
                    if (i % 3 == 0) {
                        e.skills.add(java);
                    }
                    if (i % 4 == 0) {
                        e.skills.add(sql);
                    }
                    dept.emps.add(e);
                }
                s.persist(dept);
            }
            for (int i = 0; i < 5; i++) {
                Counter c = new Counter();
                c.label = "c" + i;
                s.persist(c);
            }
        });
        String kind = "skarv.drivers.HibernateChecks$Kind";
        sf.inTransaction(s -> {
            check("count", s.createQuery("select count(e) from Emp e", Long.class).getSingleResult(), 90);
            check("join", s.createQuery(
                    "select count(e) from Emp e join e.dept d where d.name = 'd1'", Long.class)
                    .getSingleResult(), 30);
            check("page", s.createQuery("select e.name from Emp e order by e.id", String.class)
                    .setFirstResult(10).setMaxResults(3).getResultList(), "[e0_10, e0_11, e0_12]");
            check("group", s.createQuery("select d.name, count(e), sum(e.salary) from Dept d join d.emps e"
                    + " group by d.name order by d.name", Object[].class)
                    .getResultList().stream().map(Arrays::toString).toList(),
                    "[[d0, 30, 30450.00], [d1, 30, 30450.00], [d2, 30, 30450.00]]");
            check("many-to-many", s.createQuery(
                    "select count(e) from Emp e join e.skills k where k.code = 'sql'", Long.class)
                    .getSingleResult(), 24);
            check("fetch join", s.createQuery(
                    "select distinct d from Dept d join fetch d.emps where d.name = 'd2'", Dept.class)
                    .getSingleResult().emps.size(), 30);
            check("lob", s.createQuery(
                    "select length(e.bio) from Emp e where e.name = 'e0_29'", Integer.class)
                    .getSingleResult(), 14500);
            check("subquery", s.createQuery("select count(e) from Emp e"
                    + " where e.salary > (select avg(x.salary) from Emp x)", Long.class)
                    .getSingleResult(), 45);
            check("case", s.createQuery("select sum(case when e.kind = " + kind
                    + ".FULL then 1 else 0 end) from Emp e", Long.class).getSingleResult(), 45);
            check("native", s.createNativeQuery(
                    "select count(*) from emp where hired >= '2020-06-01'", Long.class)
                    .getSingleResult(), 45);
            check("table-generated ids", s.createQuery(
                    "select c.id from Counter c order by c.id", Long.class).getResultList().size(), 5);
        });
        // Optimistic locking: an update of a stale copy fails.
        Long id = sf.fromTransaction(s -> s.createQuery(
                "select e.id from Emp e where e.name = 'e0_0'", Long.class).getSingleResult());
        Emp stale = sf.fromTransaction(s -> s.find(Emp.class, id));
        sf.inTransaction(s -> s.find(Emp.class, id).salary = new BigDecimal("1.00"));
        String refused = "no exception";
        try {
            sf.inTransaction(s -> {
                stale.salary = new BigDecimal("2.00");
                s.merge(stale);
            });
        } catch (Exception e) {
            refused = e.getClass().getSimpleName();
        }
        check("optimistic lock", refused.contains("Optimistic") || refused.contains("StaleObject"), true);
        // A pessimistic lock, a bulk update; a bulk delete rolled back.
        sf.inTransaction(s -> {
            s.find(Emp.class, id, LockModeType.PESSIMISTIC_WRITE).name = "locked";
            check("bulk update", s.createMutationQuery(
                    "update Emp e set e.salary = e.salary + 1 where e.kind = " + kind + ".PART")
                    .executeUpdate(), 45);
        });
        try {
            sf.inTransaction(s -> {
                s.createMutationQuery("delete from Emp e where e.name like 'e1%'").executeUpdate();
                throw new IllegalStateException("roll back");
            });
        } catch (IllegalStateException e) {
            // As meant.
        }
        sf.inTransaction(s -> {
            check("rolled back", s.createQuery(
                    "select count(e) from Emp e where e.name like 'e1%'", Long.class).getSingleResult(), 30);
            check("locked and renamed", s.find(Emp.class, id).name, "locked");
            s.createQuery("from Dept d where d.name = 'd2'", Dept.class).getSingleResult().emps.remove(0);
        });
        sf.inTransaction(s -> check("orphan removed", s.createQuery(
                "select count(e) from Emp e", Long.class).getSingleResult(), 89));
        String duplicate = "no exception";
        try {
            sf.inTransaction(s -> {
                Dept d = new Dept();
                d.name = "d0";
                s.persist(d);
            });
        } catch (Exception e) {
            duplicate = String.valueOf(e.getCause());
        }
        check("duplicate key", duplicate.contains("Duplicate entry 'd0'"), true);
    }
}
