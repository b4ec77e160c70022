/* The table of what ran, by category and name, from trace events: the one
 * KILN_TRACE_SUMMARY=1 delivers at exit (trace.c), and the one
 * kiln_trace_summarize builds from a trace file (trace_table.c), which
 * `kiln trace summarize` prints: one code for both. */
#ifndef KILN_TRACE_TABLE_H
#define KILN_TRACE_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct kiln__trace_row {
  char what[96]; /* category without "kiln.", then the name ("op gemm") */
  unsigned long calls;
  double ns, bytes, flops; /* totals; bytes and flops from the args */
} kiln__trace_row;

typedef struct kiln__trace_table {
  kiln__trace_row *rows;
  size_t count, capacity;
  double ns; /* every row's time */
} kiln__trace_table;

/* Add one event of category cat ("kiln.op") and name, ns long, with its
 * args (NULL, or an object whose "bytes" and "flops" are counted). False
 * when memory ran out (the event is not counted). */
bool kiln__trace_table_add(kiln__trace_table *t, const char *cat,
                           const char *name, double ns, const json_t *args);

/* The table on out, longest total time first: "N kinds of work, T ms in
 * all", a header, then one row per kind of work (total ms, share, calls,
 * mean us, MB moved, GB/s, GFLOP/s, what), or "(nothing ran)". Rows fit
 * width columns (0: no limit): a name that does not fit its column goes on
 * a line of its own below its row, cut at the width. Sorts the rows. */
void kiln__trace_table_print(kiln__trace_table *t, FILE *out, size_t width);

void kiln__trace_table_free(kiln__trace_table *t);

#endif
