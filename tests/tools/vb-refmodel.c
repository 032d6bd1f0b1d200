/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reference-model test: one random sequence of reads, writes, flushes,
 * discards and write-zeroes goes to a device (a block node, or an NBD
 * export through libnbd) and to an in-memory model; every read must match
 * the model. Offsets are drawn near chunk boundaries so that requests cross
 * chunk and component boundaries. Exit 0 on success, 1 on a mismatch or
 * an I/O error (the first one is described on stderr). */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <libnbd.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define SECTOR 512

static char *opt_device;
static char *opt_nbd;
static gint64 opt_ops = 2000;
static gint64 opt_seed = 1;
static gint64 opt_chunk = 512 * 1024;
static gint64 opt_max_len = 1024 * 1024;
static gint64 opt_block = SECTOR;
static gboolean opt_no_trim;

static const GOptionEntry entries[] = {
  { "device", 0, 0, G_OPTION_ARG_FILENAME, &opt_device, "Block device to test (O_DIRECT)", "PATH" },
  { "nbd", 0, 0, G_OPTION_ARG_STRING, &opt_nbd, "NBD URI to test", "URI" },
  { "ops", 0, 0, G_OPTION_ARG_INT64, &opt_ops, "Number of operations", "N" },
  { "seed", 0, 0, G_OPTION_ARG_INT64, &opt_seed, "Random seed", "N" },
  { "chunk", 0, 0, G_OPTION_ARG_INT64, &opt_chunk, "Boundary spacing to aim at", "BYTES" },
  { "max-len", 0, 0, G_OPTION_ARG_INT64, &opt_max_len, "Longest request", "BYTES" },
  { "block", 0, 0, G_OPTION_ARG_INT64, &opt_block, "Alignment of requests", "BYTES" },
  { "no-trim", 0, 0, G_OPTION_ARG_NONE, &opt_no_trim, "No discards or write-zeroes", NULL },
  { NULL },
};

typedef struct {
  int fd;
  struct nbd_handle *nbd;
  guint64 size;
} Target;

static int
t_read (Target *t, void *buf, guint64 len, guint64 off)
{
  if (t->nbd)
    return nbd_pread (t->nbd, buf, len, off, 0) < 0 ? -1 : 0;
  return pread (t->fd, buf, len, off) == (ssize_t) len ? 0 : -1;
}

static int
t_write (Target *t, const void *buf, guint64 len, guint64 off, gboolean fua)
{
  if (t->nbd)
    return nbd_pwrite (t->nbd, buf, len, off, fua ? LIBNBD_CMD_FLAG_FUA : 0) < 0 ? -1 : 0;
  if (pwrite (t->fd, buf, len, off) != (ssize_t) len)
    return -1;
  return fua ? fdatasync (t->fd) : 0;
}

static int
t_flush (Target *t)
{
  return t->nbd ? nbd_flush (t->nbd, 0) : fdatasync (t->fd);
}

static int
t_trim (Target *t, guint64 len, guint64 off, gboolean zero)
{
  guint64 range[2] = { off, len };

  if (t->nbd)
    return zero ? nbd_zero (t->nbd, len, off, 0) : nbd_trim (t->nbd, len, off, 0);
  return ioctl (t->fd, zero ? BLKZEROOUT : BLKDISCARD, range);
}

static const char *
t_error (Target *t)
{
  return t->nbd ? nbd_get_error () : g_strerror (errno);
}

/* An offset near a multiple of the chunk, so requests straddle it. */
static guint64
pick_offset (GRand *r, guint64 size, guint64 len)
{
  guint64 limit = size - len;
  guint64 off;

  if (g_rand_boolean (r))
    {
      guint64 chunks = MAX (1, size / opt_chunk);
      guint64 b = (guint64) g_rand_int_range (r, 0, (gint32) MIN (chunks, G_MAXINT32)) * opt_chunk;
      gint64 delta = (gint64) g_rand_int_range (r, -8, 8) * opt_block;
      off = (gint64) b + delta < 0 ? 0 : b + delta;
    }
  else
    off = (guint64) (g_rand_double (r) * (limit / opt_block)) * opt_block;
  return MIN (off, limit) / opt_block * opt_block;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- compare a device with a model");
  g_autoptr (GError) error = NULL;
  Target t = { .fd = -1 };
  guint8 *model, *known, *buf, *check;
  GRand *r;
  guint64 counts[5] = { 0 };

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || (!opt_device == !opt_nbd))
    {
      fprintf (stderr, "vb-refmodel: %s\n", error ? error->message : "give --device or --nbd");
      return 2;
    }
  if (opt_nbd)
    {
      t.nbd = nbd_create ();
      /* the test's own URI may name a TLS keys file (tls-psk-file=) */
      if (t.nbd == NULL || nbd_set_uri_allow_local_file (t.nbd, true) < 0
          || nbd_connect_uri (t.nbd, opt_nbd) < 0)
        {
          fprintf (stderr, "vb-refmodel: %s: %s\n", opt_nbd, nbd_get_error ());
          return 1;
        }
      t.size = nbd_get_size (t.nbd);
    }
  else
    {
      t.fd = open (opt_device, O_RDWR | O_DIRECT);
      if (t.fd < 0 || ioctl (t.fd, BLKGETSIZE64, &t.size) < 0)
        {
          fprintf (stderr, "vb-refmodel: %s: %s\n", opt_device, g_strerror (errno));
          return 1;
        }
    }
  if (t.size < (guint64) opt_max_len * 2)
    opt_max_len = t.size / 2 / opt_block * opt_block;

  model = malloc (t.size);
  known = calloc (t.size / SECTOR, 1);
  if (posix_memalign ((void **) &buf, 4096, opt_max_len) != 0
      || posix_memalign ((void **) &check, 4096, MAX (opt_max_len, (gint64) (1 << 20))) != 0
      || model == NULL || known == NULL)
    return 1;
  /* the model starts as whatever the device holds */
  for (guint64 off = 0; off < t.size; off += 1 << 20)
    {
      guint64 len = MIN ((guint64) 1 << 20, t.size - off);
      if (t_read (&t, check, len, off) < 0)
        {
          fprintf (stderr, "vb-refmodel: initial read at %" G_GUINT64_FORMAT ": %s\n", off,
                   t_error (&t));
          return 1;
        }
      memcpy (model + off, check, len);
    }
  memset (known, 1, t.size / SECTOR);

  r = g_rand_new_with_seed ((guint32) opt_seed);
  for (gint64 i = 0; i < opt_ops; i++)
    {
      guint64 len
          = (guint64) g_rand_int_range (r, 1, (gint32) (opt_max_len / opt_block) + 1) * opt_block;
      guint64 off = pick_offset (r, t.size, len);
      int op = g_rand_int_range (r, 0, 100);

      if (op < 40)
        {
          for (guint64 k = 0; k < len; k += 4)
            *(guint32 *) (buf + k) = g_rand_int (r);
          if (t_write (&t, buf, len, off, op < 5) < 0)
            goto io_error;
          memcpy (model + off, buf, len);
          memset (known + off / SECTOR, 1, len / SECTOR);
          counts[0]++;
        }
      else if (op < 80)
        {
          if (t_read (&t, buf, len, off) < 0)
            goto io_error;
          for (guint64 s = 0; s < len; s += SECTOR)
            if (known[(off + s) / SECTOR] && memcmp (buf + s, model + off + s, SECTOR) != 0)
              {
                fprintf (stderr,
                         "vb-refmodel: op %" G_GINT64_FORMAT ": read of %" G_GUINT64_FORMAT
                         "+%" G_GUINT64_FORMAT ": sector at %" G_GUINT64_FORMAT " differs\n",
                         i, off, len, off + s);
                return 1;
              }
          counts[1]++;
        }
      else if (op < 88)
        {
          if (t_flush (&t) < 0)
            goto io_error;
          counts[2]++;
        }
      else if (!opt_no_trim && op < 94)
        {
          if (t_trim (&t, len, off, FALSE) < 0)
            goto io_error;
          /* discarded data is unspecified until written again */
          memset (known + off / SECTOR, 0, len / SECTOR);
          counts[3]++;
        }
      else if (!opt_no_trim)
        {
          if (t_trim (&t, len, off, TRUE) < 0)
            goto io_error;
          memset (model + off, 0, len);
          memset (known + off / SECTOR, 1, len / SECTOR);
          counts[4]++;
        }
      continue;
    io_error:
      fprintf (stderr,
               "vb-refmodel: op %" G_GINT64_FORMAT " (%d) at %" G_GUINT64_FORMAT
               "+%" G_GUINT64_FORMAT ": %s\n",
               i, op, off, len, t_error (&t));
      return 1;
    }
  /* and the whole device once more */
  for (guint64 off = 0; off < t.size; off += 1 << 20)
    {
      guint64 len = MIN ((guint64) 1 << 20, t.size - off);
      if (t_read (&t, check, len, off) < 0)
        {
          fprintf (stderr, "vb-refmodel: final read at %" G_GUINT64_FORMAT ": %s\n", off,
                   t_error (&t));
          return 1;
        }
      for (guint64 s = 0; s < len; s += SECTOR)
        if (known[(off + s) / SECTOR] && memcmp (check + s, model + off + s, SECTOR) != 0)
          {
            fprintf (stderr, "vb-refmodel: final read: sector at %" G_GUINT64_FORMAT " differs\n",
                     off + s);
            return 1;
          }
    }
  printf ("ok: %" G_GUINT64_FORMAT " writes, %" G_GUINT64_FORMAT " reads, %" G_GUINT64_FORMAT
          " flushes, %" G_GUINT64_FORMAT " discards, %" G_GUINT64_FORMAT
          " write-zeroes over %" G_GUINT64_FORMAT " bytes\n",
          counts[0], counts[1], counts[2], counts[3], counts[4], t.size);
  if (t.nbd)
    {
      nbd_shutdown (t.nbd, 0);
      nbd_close (t.nbd);
    }
  g_rand_free (r);
  return 0;
}
