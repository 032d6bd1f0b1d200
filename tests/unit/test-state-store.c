/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of state.json with its journal (src/core/vb-state-store.c):
 * every commit loads again as it was made, by the owner and by a reader;
 * N changes write O(N) bytes; a cut last record is left out, any other
 * damage refuses the load naming the file and line; a journal that follows
 * an older state.json is left out and never replayed onto a new one. */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "vb-error.h"
#include "vb-state-store.h"

typedef struct {
  char *dir;
  char *state_path;
  char *journal_path;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  f->dir = g_dir_make_tmp ("vb-state-store-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  f->state_path = g_build_filename (f->dir, "state.json", NULL);
  f->journal_path = g_build_filename (f->dir, VB_STATE_JOURNAL_FILE, NULL);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_unlink (f->state_path);
  g_unlink (f->journal_path);
  g_assert_no_errno (g_rmdir (f->dir));
  g_free (f->dir);
  g_free (f->state_path);
  g_free (f->journal_path);
}

static VbDeviceConfig *
device (const char *name, guint size)
{
  g_autofree char *uuid = g_uuid_string_random ();
  g_autofree char *cuuid = g_uuid_string_random ();
  g_autofree char *source = g_strdup_printf ("/srv/%s.img", name);
  VbDeviceConfig *d = vb_device_config_new (name, uuid, "file", "auto");

  g_hash_table_insert (d->attributes, g_strdup ("size"), g_strdup_printf ("%u", size));
  g_ptr_array_add (d->components, vb_component_config_new (source, "0", cuuid));
  return d;
}

static char *
text_of (const VbState *state)
{
  return vb_state_to_json (state);
}

/* What a fresh owner and a reader load equals @expected. */
static void
assert_loads (Fixture *f, const VbState *expected)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbStateStore) other = vb_state_store_new (f->state_path);
  g_autoptr (VbState) owner = vb_state_store_load (other, &error);
  g_autoptr (VbState) reader = NULL;
  g_autofree char *want = text_of (expected);
  g_autofree char *got = NULL;
  g_autofree char *got_reader = NULL;

  g_assert_no_error (error);
  reader = vb_state_read (f->state_path, &error);
  g_assert_no_error (error);
  got = text_of (owner);
  got_reader = text_of (reader);
  g_assert_cmpstr (got, ==, want);
  g_assert_cmpstr (got_reader, ==, want);
}

static VbStateStore *
open_store (Fixture *f, VbState **state)
{
  g_autoptr (GError) error = NULL;
  VbStateStore *store = vb_state_store_new (f->state_path);

  *state = vb_state_store_load (store, &error);
  g_assert_no_error (error);
  return store;
}

static void
commit (VbStateStore *store, const VbState *next)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (vb_state_store_commit (store, next, &error));
  g_assert_no_error (error);
}

/* Creates, changes and deletes in a random order: each commit loads again
 * exactly (order kept), through journal records and folds alike. */
static void
test_round_trip (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = NULL;
  g_autoptr (VbStateStore) store = open_store (f, &state);
  g_autoptr (GRand) rand = g_rand_new_with_seed (22);
  guint journaled = 0, serial = 0;

  for (guint step = 0; step < 400; step++)
    {
      guint what = g_rand_int_range (rand, 0, 10);

      if (what < 5 || state->devices->len == 0)
        {
          g_autofree char *name = g_strdup_printf ("d%u", serial++);
          g_ptr_array_add (state->devices, device (name, step));
        }
      else if (what < 8)
        {
          /* the store shares what it was given: changed through _mut */
          VbDeviceConfig *d = vb_state_device_mut (
              state, (guint) g_rand_int_range (rand, 0, state->devices->len));
          g_hash_table_insert (d->attributes, g_strdup ("size"), g_strdup_printf ("%u", step));
          d->started = !d->started;
        }
      else
        {
          g_ptr_array_remove_index (state->devices,
                                    g_rand_int_range (rand, 0, state->devices->len));
          vb_state_reindex (state);
        }
      commit (store, state);
      if (g_file_test (f->journal_path, G_FILE_TEST_EXISTS))
        journaled++;
      assert_loads (f, state);
    }
  /* both ways were taken */
  g_assert_cmpuint (journaled, >, 100);
  g_assert_cmpuint (journaled, <, 400);
}

/* 3,000 creates write a small multiple of the final state.json, not the
 * O(N²) bytes of writing it whole each time (~1,500 times its size). */
static void
test_linear_bytes (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = NULL;
  g_autoptr (VbStateStore) store = open_store (f, &state);
  g_autofree char *final = NULL;
  guint64 written;

  for (guint i = 0; i < 3000; i++)
    {
      g_autofree char *name = g_strdup_printf ("dev%u", i);
      g_ptr_array_add (state->devices, device (name, i));
      commit (store, state);
    }
  final = text_of (state);
  written = vb_state_store_bytes_written (store);
  g_test_message ("3000 creates wrote %" G_GUINT64_FORMAT " bytes; state.json is %zu", written,
                  strlen (final));
  g_assert_cmpuint (written, <, 6 * strlen (final));
  assert_loads (f, state);
}

/* A store with devices a, b in state.json and a journal after it. */
static VbStateStore *
journaled_store (Fixture *f, VbState **state)
{
  VbStateStore *store = open_store (f, state);

  g_ptr_array_add ((*state)->devices, device ("a", 1));
  commit (store, *state); /* the first change writes state.json */
  g_ptr_array_add ((*state)->devices, device ("b", 2));
  commit (store, *state);
  g_assert_true (g_file_test (f->journal_path, G_FILE_TEST_EXISTS));
  return store;
}

static void
append_bytes (const char *path, const char *bytes, gsize len)
{
  FILE *file = fopen (path, "ab");

  g_assert_nonnull (file);
  g_assert_cmpuint (fwrite (bytes, 1, len, file), ==, len);
  g_assert_cmpint (fclose (file), ==, 0);
}

/* A crash cut the last append (never acknowledged): the rest loads, and
 * the next commit does not append after the cut. */
static void
test_cut_tail (Fixture *f, gconstpointer data)
{
  static const char *const tails[] = {
    "0123", /* the start of a record */
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa {\"version\":1}\n",
    "\0\0\0\0\0\0\0\0", /* a size that went to disk before the data */
  };
  static const gsize lens[] = { 4, 79, 8 };

  for (guint i = 0; i < G_N_ELEMENTS (tails); i++)
    {
      g_autoptr (VbState) state = NULL;
      g_autoptr (VbState) loaded = NULL;
      g_autoptr (VbStateStore) store = NULL;
      g_autoptr (VbStateStore) again = NULL;

      g_unlink (f->state_path);
      g_unlink (f->journal_path);
      store = journaled_store (f, &state);
      append_bytes (f->journal_path, tails[i], lens[i]);
      assert_loads (f, state);

      again = open_store (f, &loaded);
      g_ptr_array_add (loaded->devices, device ("c", 3));
      commit (again, loaded);
      assert_loads (f, loaded);
      g_assert_false (g_file_test (f->journal_path, G_FILE_TEST_EXISTS));
    }
}

static void
assert_refused (Fixture *f, const char *what)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbStateStore) store = vb_state_store_new (f->state_path);
  g_autoptr (VbState) state = vb_state_store_load (store, &error);
  g_autoptr (GError) error2 = NULL;
  g_autoptr (VbState) state2 = vb_state_read (f->state_path, &error2);

  g_assert_null (state);
  g_assert_null (state2);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, f->journal_path));
  g_assert_nonnull (strstr (error->message, what));
  g_assert_cmpstr (error->message, ==, error2->message);
}

static void
rewrite_journal (Fixture *f, char *(*edit) (const char *) )
{
  g_autofree char *text = NULL;
  g_autofree char *edited = NULL;

  g_assert_true (g_file_get_contents (f->journal_path, &text, NULL, NULL));
  edited = edit (text);
  g_assert_true (g_file_set_contents (f->journal_path, edited, -1, NULL));
}

/* a byte of the first record changed, another record after it */
static char *
flip_first_record (const char *text)
{
  char *s = g_strdup (text);
  char *second = strchr (s, '\n') + 1;
  char *name = strstr (second, "\"b\"");

  name[1] = 'x';
  return s;
}

static char *
bad_magic (const char *text)
{
  char *s = g_strdup (text);

  s[0] = 'x';
  return s;
}

/* a record whose SHA-256 matches, but which deletes what is not there */
static char *
delete_unknown (const char *text)
{
  const char *record = "{\"version\":1,\"delete\":[\"nosuch\"],\"devices\":[]}";
  g_autofree char *sum = g_compute_checksum_for_string (G_CHECKSUM_SHA256, record, -1);

  return g_strconcat (text, sum, " ", record, "\n", NULL);
}

/* ... and one that is not the schema */
static char *
bad_schema (const char *text)
{
  const char *record = "{\"version\":1,\"devices\":[{\"name\":\"c\",\"driver\":7}]}";
  g_autofree char *sum = g_compute_checksum_for_string (G_CHECKSUM_SHA256, record, -1);

  return g_strconcat (text, sum, " ", record, "\n", NULL);
}

static void
test_damage (Fixture *f, gconstpointer data)
{
  struct {
    char *(*edit) (const char *);
    const char *what;
  } cases[] = {
    { flip_first_record, ":2: the record does not match its SHA-256, and records follow it" },
    { bad_magic, ":1: not a vblk journal" },
    { delete_unknown, ":4: deletes device 'nosuch'" },
    { bad_schema, ":4: devices[0]" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (VbState) state = NULL;
      g_autoptr (VbStateStore) store = NULL;
      g_autofree char *before = NULL;
      g_autofree char *after = NULL;

      g_unlink (f->state_path);
      g_unlink (f->journal_path);
      store = journaled_store (f, &state);
      g_ptr_array_add (state->devices, device ("c", 3));
      commit (store, state);
      rewrite_journal (f, cases[i].edit);
      g_assert_true (g_file_get_contents (f->journal_path, &before, NULL, NULL));
      assert_refused (f, cases[i].what);
      /* refused, and nothing touched */
      g_assert_true (g_file_get_contents (f->journal_path, &after, NULL, NULL));
      g_assert_cmpstr (before, ==, after);
    }
}

/* A journal left by a crash between writing state.json whole and removing
 * it follows the older state.json: it is left out, and goes with the next
 * commit. */
static void
test_stale_journal (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = NULL;
  g_autoptr (VbState) loaded = NULL;
  g_autoptr (VbStateStore) store = journaled_store (f, &state);
  g_autoptr (VbStateStore) again = NULL;
  g_autofree char *journal = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_true (g_file_get_contents (f->journal_path, &journal, NULL, NULL));
  /* the whole state written by hand, as a fold would */
  g_assert_true (vb_state_save (state, f->state_path, &error));
  g_assert_true (g_file_set_contents (f->journal_path, journal, -1, NULL));
  assert_loads (f, state);

  again = open_store (f, &loaded);
  g_ptr_array_remove_index (loaded->devices, 0);
  vb_state_reindex (loaded);
  commit (again, loaded);
  g_assert_false (g_file_test (f->journal_path, G_FILE_TEST_EXISTS));
  assert_loads (f, loaded);
}

/* A change back and forth until the journal is folded at a state whose
 * text is the one the journal follows: never replayed onto it. */
static void
test_fold_to_base (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = NULL;
  g_autoptr (VbStateStore) store = open_store (f, &state);
  guint folds = 0;

  g_ptr_array_add (state->devices, device ("a", 1));
  commit (store, state);
  for (guint i = 0; i < 400; i++)
    {
      VbDeviceConfig *d = vb_state_device_mut (state, 0);
      gboolean had = g_file_test (f->journal_path, G_FILE_TEST_EXISTS);

      d->started = !d->started;
      commit (store, state);
      if (had && !g_file_test (f->journal_path, G_FILE_TEST_EXISTS))
        folds++;
      assert_loads (f, state);
    }
  g_assert_cmpuint (folds, >=, 2);
}

/* Devices that move are written whole (a record keeps places). */
static void
test_reorder (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = NULL;
  g_autoptr (VbStateStore) store = journaled_store (f, &state);
  gpointer first = state->devices->pdata[0];

  state->devices->pdata[0] = state->devices->pdata[1];
  state->devices->pdata[1] = first;
  vb_state_reindex (state);
  commit (store, state);
  g_assert_false (g_file_test (f->journal_path, G_FILE_TEST_EXISTS));
  assert_loads (f, state);
}

/* The same UUID twice is refused before anything is written. */
static void
test_refused_change (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = NULL;
  g_autoptr (VbStateStore) store = journaled_store (f, &state);
  g_autoptr (VbState) before = vb_state_copy (state);
  g_autoptr (GError) error = NULL;
  VbDeviceConfig *c = device ("c", 3);

  g_free (c->uuid);
  c->uuid = g_strdup (((VbDeviceConfig *) state->devices->pdata[0])->uuid);
  g_ptr_array_add (state->devices, c);
  g_assert_false (vb_state_store_commit (store, state, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "would not load again"));
  g_assert_nonnull (strstr (error->message, "devices 'a' and 'c' have the same UUID"));
  assert_loads (f, before);
  g_clear_error (&error);
  /* a device kept whose UUID changes to another's: refused too, named in
   * the state's order (only the changed devices are checked at a change) */
  g_ptr_array_remove_index (state->devices, 2);
  vb_state_reindex (state);
  {
    VbDeviceConfig *b = vb_state_lookup_mut (state, "b");
    g_free (b->uuid);
    b->uuid = g_ascii_strup (((VbDeviceConfig *) state->devices->pdata[0])->uuid, -1);
  }
  g_assert_false (vb_state_store_commit (store, state, &error));
  g_assert_nonnull (strstr (error->message, "devices 'a' and 'b' have the same UUID"));
  assert_loads (f, before);
  vb_state_free (state);
  state = vb_state_copy (before);
  /* the store goes on from what is on disk */
  g_ptr_array_add (state->devices, device ("d", 4));
  commit (store, state);
  assert_loads (f, state);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL);
#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("/state-store/round-trip", test_round_trip);
  ADD ("/state-store/linear-bytes", test_linear_bytes);
  ADD ("/state-store/cut-tail", test_cut_tail);
  ADD ("/state-store/damage", test_damage);
  ADD ("/state-store/stale-journal", test_stale_journal);
  ADD ("/state-store/fold-to-base", test_fold_to_base);
  ADD ("/state-store/reorder", test_reorder);
  ADD ("/state-store/refused-change", test_refused_change);
#undef ADD
  return g_test_run ();
}
