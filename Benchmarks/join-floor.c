// The floor of a library's first load: SQLite alone stepping through a library's members with the
// server's query (every column of `books`, by `library_id`, in `seq` order) and its readers'
// settings (read-only, the file mapped), each column's value read, nothing else. A first
// subscriber's read (the "read" part of Benchmarks/profile_join.py's table) is this plus making
// a record of each row.
//
//   cc -O2 -o /tmp/join-floor Benchmarks/join-floor.c -lsqlite3
//   /tmp/join-floor DATABASE LIBRARY_ID [ROUNDS]    # e.g. on a database from Benchmarks/seed.py
//
// Each round opens a new connection. Prints each round's wall and CPU time and their medians;
// fails when the library has no member.
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DATABASE LIBRARY_ID [ROUNDS]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (rounds < 1) rounds = 1;
    double *walls = calloc(rounds, sizeof(double)), *cpus = calloc(rounds, sizeof(double));
    long rows = 0;
    for (int round = 0; round < rounds; round++) {
        sqlite3 *db;
        sqlite3_stmt *stmt;
        if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
            sqlite3_exec(db, "PRAGMA mmap_size = 1073741824", NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(db, "SELECT * FROM books WHERE library_id = ? ORDER BY seq", -1, &stmt, NULL) != SQLITE_OK) {
            fprintf(stderr, "%s: %s\n", argv[1], sqlite3_errmsg(db));
            return 1;
        }
        sqlite3_bind_text(stmt, 1, argv[2], -1, SQLITE_STATIC);
        double wall = now(CLOCK_MONOTONIC), cpu = now(CLOCK_PROCESS_CPUTIME_ID);
        int columns = sqlite3_column_count(stmt);
        long checksum = 0;  // every value is read, and the compiler cannot leave a read out
        rows = 0;
        while (sqlite3_step(stmt) == SQLITE_ROW) {
            rows++;
            for (int column = 0; column < columns; column++) {
                if (sqlite3_column_type(stmt, column) == SQLITE_TEXT) {
                    const unsigned char *text = sqlite3_column_text(stmt, column);
                    checksum += sqlite3_column_bytes(stmt, column) + text[0];
                } else {
                    checksum += sqlite3_column_int64(stmt, column);
                }
            }
        }
        walls[round] = now(CLOCK_MONOTONIC) - wall;
        cpus[round] = now(CLOCK_PROCESS_CPUTIME_ID) - cpu;
        sqlite3_finalize(stmt);
        sqlite3_close(db);
        printf("round %d: %ld rows in %.3f s (CPU %.3f s), checksum %ld\n", round + 1, rows, walls[round], cpus[round],
               checksum);
    }
    if (rows == 0) {
        fprintf(stderr, "library %s has no member in %s\n", argv[2], argv[1]);
        return 1;
    }
    qsort(walls, rounds, sizeof(double), compare);
    qsort(cpus, rounds, sizeof(double), compare);
    printf("median of %d rounds: %ld rows in %.3f s, CPU %.3f s\n", rounds, rows, walls[rounds / 2], cpus[rounds / 2]);
    return 0;
}
