"""MariaDB and MySQL: binlog CDC source and consistent-snapshot reads."""
