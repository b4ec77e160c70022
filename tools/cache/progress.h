/* A one-line progress display for a terminal (kiln cache warm): each update
 * rewrites the line in place, cut to the terminal's width so that it never
 * wraps (a wrapped line cannot be rewritten by a carriage return and stays
 * behind as a ghost). */
#ifndef KILN_TOOLS_CACHE_PROGRESS_H
#define KILN_TOOLS_CACHE_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

/* Rewrite the current line of out with "[###...] done/total text", fitted
 * to columns (cli_terminal_columns): the bar shrinks, then disappears, then text is cut. */
void progress_show(FILE *out, int columns, size_t done, size_t total,
                   const char *text);

/* Erase the progress line, leaving the cursor at its start, so that a
 * normal line (an error, the summary) can be printed in its place. */
void progress_clear(FILE *out);

#endif
