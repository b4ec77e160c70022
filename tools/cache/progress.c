/* The progress line of `kiln cache warm` on a terminal (progress.h). */
#include "progress.h"

#include <string.h>

void progress_show(FILE *out, int columns, size_t done, size_t total,
                   const char *text) {
  /* One column stays free: writing the last one makes some terminals wrap
   * at once, and the next carriage return would then miss the line. */
  size_t room = columns > 1 ? (size_t)columns - 1 : 1;
  char counts[48];
  snprintf(counts, sizeof counts, "%zu/%zu", done, total);
  /* The bar takes a quarter of the width (at most 30 cells) and is left
   * out below 8 cells. */
  size_t cells = room / 4 > 30 ? 30 : room / 4;
  char line[512];
  size_t len = 0;
  if (cells >= 8 && cells + 3 < sizeof line) {
    size_t filled = total ? done * cells / total : cells;
    line[len++] = '[';
    for (size_t i = 0; i < cells; i++)
      line[len++] = i < filled ? '#' : '.';
    line[len++] = ']';
    line[len++] = ' ';
  }
  snprintf(line + len, sizeof line - len, "%s %s", counts, text);
  len = strlen(line);
  if (len > room)
    len = room;
  fprintf(out, "\r%.*s\033[K", (int)len, line);
  fflush(out);
}

void progress_clear(FILE *out) {
  fputs("\r\033[K", out);
  fflush(out);
}
