/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Standalone driver for the fuzz targets, for machines and builds without
 * libFuzzer: runs LLVMFuzzerTestOneInput over every file of the corpus
 * directories (or files) given, then over a deterministic set of random
 * mutations of them (GRand with a fixed seed), so `meson test` repeats the
 * same inputs on every run. `--write-seeds DIR` writes the target's seed
 * corpus. */
#include "config.h"

#include "fuzz.h"

#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void
add_input (GPtrArray *corpus, const char *path)
{
  GError *error = NULL;
  char *contents;
  gsize length;

  if (!g_file_get_contents (path, &contents, &length, &error))
    {
      fprintf (stderr, "%s\n", error->message);
      exit (2);
    }
  g_ptr_array_add (corpus, g_bytes_new_take (contents, length));
}

static gint
compare_paths (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
add_path (GPtrArray *corpus, const char *path)
{
  GDir *dir;
  const char *name;
  GPtrArray *names;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      add_input (corpus, path);
      return;
    }
  dir = g_dir_open (path, 0, NULL);
  if (dir == NULL)
    {
      fprintf (stderr, "cannot open %s\n", path);
      exit (2);
    }
  /* Sorted, so that the mutations do not depend on directory order. */
  names = g_ptr_array_new_with_free_func (g_free);
  while ((name = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_build_filename (path, name, NULL));
  g_dir_close (dir);
  g_ptr_array_sort (names, compare_paths);
  for (guint i = 0; i < names->len; i++)
    add_input (corpus, names->pdata[i]);
  g_ptr_array_unref (names);
}

static const guint64 interesting[] = {
  0,
  1,
  2,
  0x7f,
  0x80,
  0xff,
  0x100,
  4095,
  4096,
  8192,
  65535,
  65536,
  1 << 20,
  0x7fffffff,
  0x80000000,
  0xffffffff,
  G_GUINT64_CONSTANT (0x100000000),
  G_MAXINT64,
  G_MAXUINT64,
};

/* One to eight edits of a copy of @base: bit flips, random or interesting
 * bytes and words, copied runs, truncation and extension. */
static GByteArray *
mutate (GRand *rand, GBytes *base)
{
  GByteArray *a = g_byte_array_new ();
  gsize base_len;
  const guint8 *base_data = g_bytes_get_data (base, &base_len);
  guint edits = g_rand_int_range (rand, 1, 9);

  g_byte_array_append (a, base_data, base_len);
  for (guint e = 0; e < edits; e++)
    {
      guint kind = g_rand_int_range (rand, 0, 7);
      gsize pos = 0;

      /* Half the edits land in the first 256 bytes, where formats keep
       * their headers. */
      if (a->len > 0)
        pos = g_rand_int_range (rand, 0, g_rand_boolean (rand) ? MIN (a->len, 256) : a->len);
      /* Truncation hides every other edit: keep it rare. */
      if (kind == 5 && g_rand_int_range (rand, 0, 4) != 0)
        kind = 0;
      if (a->len == 0 && kind != 6)
        kind = 6;
      switch (kind)
        {
        case 0: /* flip a bit */
          a->data[pos] ^= 1u << g_rand_int_range (rand, 0, 8);
          break;
        case 1: /* a random byte */
          a->data[pos] = g_rand_int_range (rand, 0, 256);
          break;
        case 2: /* an interesting value, 1, 4 or 8 bytes little-endian */
          case 3: {
            guint64 v = interesting[g_rand_int_range (rand, 0, G_N_ELEMENTS (interesting))];
            static const guint widths[] = { 1, 4, 8 };
            guint width = widths[g_rand_int_range (rand, 0, 3)];

            if (g_rand_boolean (rand))
              v = -v;
            pos &= ~(gsize) (width - 1);
            for (guint i = 0; i < width && pos + i < a->len; i++)
              a->data[pos + i] = (guint8) (v >> (8 * i));
            break;
          }
          case 4: /* copy a run from elsewhere */
          {
            gsize from = g_rand_int_range (rand, 0, a->len);
            gsize n = g_rand_int_range (rand, 1, 65);

            n = MIN (n, MIN (a->len - from, a->len - pos));
            memmove (a->data + pos, a->data + from, n);
            break;
          }
        case 5: /* truncate */
          g_byte_array_set_size (a, pos);
          break;
          case 6: /* extend with random bytes */
          {
            gsize n = g_rand_int_range (rand, 1, 33);

            for (gsize i = 0; i < n; i++)
              {
                guint8 b = g_rand_int_range (rand, 0, 256);

                g_byte_array_append (a, &b, 1);
              }
            break;
          }
        }
    }
  return a;
}

int
main (int argc, char **argv)
{
  char *seeds_dir = NULL;
  gint iterations = 20000;
  gint seed = 20240611;
  GOptionEntry entries[]
      = { { "write-seeds", 0, 0, G_OPTION_ARG_FILENAME, &seeds_dir,
            "Write the seed corpus into DIR and exit", "DIR" },
          { "iterations", 'n', 0, G_OPTION_ARG_INT, &iterations, "Mutated inputs to run", "N" },
          { "seed", 's', 0, G_OPTION_ARG_INT, &seed, "Seed of the mutations", "S" },
          G_OPTION_ENTRY_NULL };
  GOptionContext *context = g_option_context_new ("CORPUS...");
  GError *error = NULL;
  GPtrArray *corpus;
  GRand *rand;
  guint64 bytes = 0;

  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return 2;
    }
  g_option_context_free (context);
  if (seeds_dir != NULL)
    {
      if (g_mkdir_with_parents (seeds_dir, 0755) != 0)
        {
          fprintf (stderr, "cannot create %s\n", seeds_dir);
          return 1;
        }
      return vb_fuzz_write_seeds (seeds_dir);
    }

  corpus = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  for (int i = 1; i < argc; i++)
    add_path (corpus, argv[i]);
  if (corpus->len == 0)
    {
      fprintf (stderr, "no corpus input given\n");
      return 2;
    }
  /* The empty input, and the seeds as they are. */
  g_ptr_array_add (corpus, g_bytes_new_static ("", 0));
  for (guint i = 0; i < corpus->len; i++)
    {
      gsize len;
      const guint8 *data = g_bytes_get_data (corpus->pdata[i], &len);

      LLVMFuzzerTestOneInput (data, len);
    }

  rand = g_rand_new_with_seed ((guint32) seed);
  for (gint i = 0; i < iterations; i++)
    {
      GBytes *base = corpus->pdata[g_rand_int_range (rand, 0, corpus->len)];
      GByteArray *input = mutate (rand, base);

      bytes += input->len;
      LLVMFuzzerTestOneInput (input->data, input->len);
      g_byte_array_unref (input);
    }
  printf ("%u corpus inputs and %d mutations (seed %d, %" G_GUINT64_FORMAT " bytes) passed\n",
          corpus->len, iterations, seed, bytes);
  g_rand_free (rand);
  g_ptr_array_unref (corpus);
  return 0;
}
