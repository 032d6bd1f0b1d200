/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vb-log-replay: reads the log that the kernel's dm-log-writes target
 * keeps of every write to a device, for the power-loss tests.
 *
 *   vb-log-replay list LOG
 *       one line per entry: INDEX FLAGS SECTOR SECTORS [MARK], FLAGS a
 *       word of F (flush), U (FUA), D (discard), M (mark), X (metadata)
 *       or "-"; SECTOR and SECTORS in the log's sector size (first line:
 *       "# sectorsize N entries M")
 *   vb-log-replay replay LOG TARGET FROM TO
 *       applies entries FROM..TO (inclusive) to TARGET, a file or a block
 *       device that held what the logged device held before entry FROM,
 *       then fdatasyncs it. A discard becomes zeroes (a punched hole on a
 *       file), what the loop devices under the legs give.
 *
 * The log's format (the kernel's drivers/md/dm-log-writes.c, all fields
 * little-endian): sector 0 holds {u64 magic, u64 version 1, u64 entries,
 * u32 sectorsize}; the entries follow from byte sectorsize, each a sector
 * {u64 sector, u64 sectors, u64 flags, u64 data_len} (a mark's text after
 * those 32 bytes) and then, for a write, its SECTORS sectors of data.
 * Anything else is refused with the entry it was found in. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MAGIC 0x6a736677736872ULL
#define LOG_VERSION 1
#define ENTRY_SIZE 32

enum {
  LOG_FLUSH = 1 << 0,
  LOG_FUA = 1 << 1,
  LOG_DISCARD = 1 << 2,
  LOG_MARK = 1 << 3,
  LOG_METADATA = 1 << 4,
  LOG_KNOWN = 0x1f,
};

typedef struct {
  int fd;
  const char *path;
  guint32 sectorsize;
  guint64 nr_entries;
  guint64 next; /* byte offset of the next entry */
  guint64 index;
  guint8 *header; /* one sector */
} LogReader;

typedef struct {
  guint64 sector, sectors, flags, data_len, data_offset;
  char mark[4096]; /* up to the sector size less the header */
} LogEntry;

static G_NORETURN void die (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

static void
die (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  fputs ("vb-log-replay: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
  exit (1);
}

static guint64
le64_at (const guint8 *p)
{
  guint64 v;

  memcpy (&v, p, sizeof v);
  return GUINT64_FROM_LE (v);
}

static void
read_exactly (LogReader *log, void *buf, size_t len, guint64 offset, const char *what)
{
  size_t done = 0;

  while (done < len)
    {
      ssize_t n = pread (log->fd, (char *) buf + done, len - done, (off_t) (offset + done));

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        die ("%s: %s at byte %" G_GUINT64_FORMAT ": %s", log->path, what, offset + done,
             g_strerror (errno));
      if (n == 0)
        die ("%s: the log ends inside %s (byte %" G_GUINT64_FORMAT ")", log->path, what,
             offset + done);
      done += (size_t) n;
    }
}

static void
log_open (LogReader *log, const char *path)
{
  guint8 super[4096];
  guint32 ss;

  log->path = path;
  log->fd = open (path, O_RDONLY | O_CLOEXEC);
  if (log->fd < 0)
    die ("%s: %s", path, g_strerror (errno));
  read_exactly (log, super, 32, 0, "the super block");
  if (le64_at (super) != LOG_MAGIC)
    die ("%s: not a dm-log-writes log (magic %#" G_GINT64_MODIFIER "x)", path, le64_at (super));
  if (le64_at (super + 8) != LOG_VERSION)
    die ("%s: log version %" G_GUINT64_FORMAT ", only %d is known", path, le64_at (super + 8),
         LOG_VERSION);
  memcpy (&ss, super + 24, sizeof ss);
  ss = GUINT32_FROM_LE (ss);
  if (ss < 512 || ss > 4096 || (ss & (ss - 1)) != 0)
    die ("%s: sector size %u is not a power of two from 512 to 4096", path, ss);
  log->sectorsize = ss;
  log->nr_entries = le64_at (super + 16);
  log->next = ss;
  log->index = 0;
  log->header = g_malloc (ss);
}

/* the next entry, or FALSE after the last */
static gboolean
log_next (LogReader *log, LogEntry *e)
{
  guint64 end;

  if (log->index >= log->nr_entries)
    return FALSE;
  read_exactly (log, log->header, log->sectorsize, log->next, "an entry's header");
  e->sector = le64_at (log->header);
  e->sectors = le64_at (log->header + 8);
  e->flags = le64_at (log->header + 16);
  e->data_len = le64_at (log->header + 24);
  e->mark[0] = '\0';
  if (e->flags & ~(guint64) LOG_KNOWN)
    die ("%s: entry %" G_GUINT64_FORMAT ": unknown flags %#" G_GINT64_MODIFIER "x", log->path,
         log->index, e->flags);
  if (e->flags & LOG_MARK)
    {
      if (e->sectors != 0 || e->data_len > log->sectorsize - ENTRY_SIZE)
        die ("%s: entry %" G_GUINT64_FORMAT ": a mark with %" G_GUINT64_FORMAT
             " sectors and a text of %" G_GUINT64_FORMAT " bytes",
             log->path, log->index, e->sectors, e->data_len);
      memcpy (e->mark, log->header + ENTRY_SIZE, e->data_len);
      e->mark[e->data_len] = '\0';
      if (strlen (e->mark) != e->data_len)
        die ("%s: entry %" G_GUINT64_FORMAT ": a mark's text holds a NUL", log->path, log->index);
      for (char *c = e->mark; *c; c++)
        if (!g_ascii_isgraph (*c))
          *c = '?';
    }
  else if (e->data_len != 0)
    die ("%s: entry %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT " bytes of text on an entry that "
         "is not a mark",
         log->path, log->index, e->data_len);
  if (e->sectors > G_MAXUINT64 / log->sectorsize / 2
      || e->sector > G_MAXUINT64 / log->sectorsize / 2)
    die ("%s: entry %" G_GUINT64_FORMAT ": sector %" G_GUINT64_FORMAT " + %" G_GUINT64_FORMAT
         " is out of any range",
         log->path, log->index, e->sector, e->sectors);
  e->data_offset = log->next + log->sectorsize;
  end = e->data_offset;
  if (!(e->flags & (LOG_DISCARD | LOG_MARK)))
    end += e->sectors * log->sectorsize;
  log->next = end;
  log->index++;
  return TRUE;
}

static int
cmd_list (const char *path)
{
  LogReader log = { 0 };
  LogEntry e;

  log_open (&log, path);
  printf ("# sectorsize %u entries %" G_GUINT64_FORMAT "\n", log.sectorsize, log.nr_entries);
  while (log_next (&log, &e))
    {
      char flags[8], *f = flags;

      if (e.flags & LOG_FLUSH)
        *f++ = 'F';
      if (e.flags & LOG_FUA)
        *f++ = 'U';
      if (e.flags & LOG_DISCARD)
        *f++ = 'D';
      if (e.flags & LOG_MARK)
        *f++ = 'M';
      if (e.flags & LOG_METADATA)
        *f++ = 'X';
      if (f == flags)
        *f++ = '-';
      *f = '\0';
      printf ("%" G_GUINT64_FORMAT " %s %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "%s%s\n",
              log.index - 1, flags, e.sector, e.sectors, e.mark[0] ? " " : "", e.mark);
    }
  return 0;
}

static void
write_all (int fd, const char *target, const guint8 *buf, size_t len, guint64 offset)
{
  size_t done = 0;

  while (done < len)
    {
      ssize_t n = pwrite (fd, buf + done, len - done, (off_t) (offset + done));

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        die ("%s: writing at byte %" G_GUINT64_FORMAT ": %s", target, offset + done,
             n < 0 ? g_strerror (errno) : "nothing written");
      done += (size_t) n;
    }
}

static void
zero_range (int fd, const char *target, gboolean blockdev, guint64 offset, guint64 len)
{
  if (blockdev)
    {
      guint64 range[2] = { offset, len };

      if (ioctl (fd, BLKZEROOUT, range) < 0)
        die ("%s: zeroing %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT ": %s", target, offset, len,
             g_strerror (errno));
    }
  else if (fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) offset, (off_t) len)
           < 0)
    {
      /* a file system that cannot punch holes gets the zeroes written */
      static const guint8 zeroes[65536];

      if (errno != EOPNOTSUPP)
        die ("%s: punching %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT ": %s", target, offset, len,
             g_strerror (errno));
      for (guint64 done = 0; done < len; done += MIN (len - done, sizeof zeroes))
        write_all (fd, target, zeroes, (size_t) MIN (len - done, sizeof zeroes), offset + done);
    }
}

static guint64
parse_index (const char *s, const char *what)
{
  guint64 v;
  g_autoptr (GError) error = NULL;

  if (!g_ascii_string_to_unsigned (s, 10, 0, G_MAXUINT64, &v, &error))
    die ("%s '%s': %s", what, s, error->message);
  return v;
}

static int
cmd_replay (const char *path, const char *target, const char *from_s, const char *to_s)
{
  LogReader log = { 0 };
  LogEntry e;
  guint64 from = parse_index (from_s, "FROM"), to = parse_index (to_s, "TO"), size;
  g_autofree guint8 *buf = NULL;
  size_t buf_size = 1 << 20;
  gboolean blockdev;
  struct stat st;
  int fd;

  log_open (&log, path);
  if (from > to)
    die ("FROM %" G_GUINT64_FORMAT " is after TO %" G_GUINT64_FORMAT, from, to);
  if (to >= log.nr_entries)
    die ("%s: entry %" G_GUINT64_FORMAT " asked for, the log has %" G_GUINT64_FORMAT, path, to,
         log.nr_entries);
  fd = open (target, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0)
    die ("%s: %s", target, g_strerror (errno));
  blockdev = S_ISBLK (st.st_mode);
  if (blockdev)
    {
      if (ioctl (fd, BLKGETSIZE64, &size) < 0)
        die ("%s: its size: %s", target, g_strerror (errno));
    }
  else if (S_ISREG (st.st_mode))
    size = (guint64) st.st_size;
  else
    die ("%s: neither a file nor a block device", target);
  buf = g_malloc (buf_size);
  /* (entries after TO are not read: a replay needs nothing of them) */
  while (log.index <= to && log_next (&log, &e))
    {
      guint64 offset = e.sector * log.sectorsize, len = e.sectors * log.sectorsize;

      if (log.index - 1 < from || (e.flags & LOG_MARK) || len == 0)
        continue;
      if (offset + len > size)
        die ("%s: entry %" G_GUINT64_FORMAT ": bytes %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT
             " are past the end of %s (%" G_GUINT64_FORMAT " bytes)",
             path, log.index - 1, offset, len, target, size);
      if (e.flags & LOG_DISCARD)
        zero_range (fd, target, blockdev, offset, len);
      else
        for (guint64 done = 0; done < len;)
          {
            size_t n = (size_t) MIN ((guint64) buf_size, len - done);

            read_exactly (&log, buf, n, e.data_offset + done, "an entry's data");
            write_all (fd, target, buf, n, offset + done);
            done += n;
          }
    }
  if (fdatasync (fd) < 0)
    die ("%s: fdatasync: %s", target, g_strerror (errno));
  close (fd);
  close (log.fd);
  g_free (log.header);
  return 0;
}

int
main (int argc, char **argv)
{
  if (argc == 3 && strcmp (argv[1], "list") == 0)
    return cmd_list (argv[2]);
  if (argc == 6 && strcmp (argv[1], "replay") == 0)
    return cmd_replay (argv[2], argv[3], argv[4], argv[5]);
  fputs ("usage: vb-log-replay list LOG\n"
         "       vb-log-replay replay LOG TARGET FROM TO\n",
         stderr);
  return 2;
}
