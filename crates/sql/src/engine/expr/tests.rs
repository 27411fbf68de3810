//! Expression tests: MySQL expressions and what MariaDB gives.
