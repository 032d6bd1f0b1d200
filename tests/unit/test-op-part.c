/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of an op's part of the dependency graph (src/daemon/reconcile/
 * vb-op-part.c): which ops may run side by side, and what each merges back
 * of its outcome. */
#include "config.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "vb-op.h"

/* Adds device @name with one component, @source. */
static void
add (VbState *state, const char *name, const char *source)
{
  g_autofree char *uuid = g_uuid_string_random ();
  g_autofree char *component_uuid = g_uuid_string_random ();
  VbDeviceConfig *d = vb_device_config_new (name, uuid, "linear", "auto");

  g_ptr_array_add (d->components, vb_component_config_new (source, "0", component_uuid));
  g_ptr_array_add (state->devices, d);
}

/* b on b1.img, w on vblk:b (one part); a on a.img; c on c.img */
static VbState *
sample (void)
{
  VbState *state = vb_state_new ();

  add (state, "b", "/img/b1.img");
  add (state, "w", "vblk:b");
  add (state, "a", "/img/a.img");
  add (state, "c", "/img/c.img");
  return state;
}

static GHashTable *
part_of (const VbState *state, const char *name)
{
  const char *names[] = { name, NULL };

  return vb_op_part_new (state, NULL, names);
}

static void
test_connected (void)
{
  g_autoptr (VbState) state = sample ();
  g_autoptr (GHashTable) b = part_of (state, "b");
  g_autoptr (GHashTable) w = part_of (state, "w");
  g_autoptr (GHashTable) a = part_of (state, "a");
  g_autoptr (GHashTable) fresh = part_of (state, "new");

  /* a device and what is built on it, either way round */
  g_assert_true (g_hash_table_contains (b, "device:w"));
  g_assert_true (g_hash_table_contains (w, "device:b"));
  g_assert_true (g_hash_table_contains (b, "source:/img/b1.img"));
  g_assert_false (g_hash_table_contains (b, "device:a"));
  g_assert_true (vb_op_parts_meet (b, w));
  g_assert_false (vb_op_parts_meet (a, b));
  /* a device not there yet is a part of its own */
  g_assert_true (g_hash_table_contains (fresh, "device:new"));
  g_assert_false (vb_op_parts_meet (fresh, b));
  /* the whole daemon meets everything */
  g_assert_true (vb_op_parts_meet (NULL, a));
  g_assert_true (vb_op_parts_meet (a, NULL));
}

/* vb_op_parts_busy says in one pass what a part made for each device and
 * met with each running op's part says (random stacks, paths shared by
 * devices of different parts). */
static void
test_busy (void)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (7);

  for (guint round = 0; round < 40; round++)
    {
      g_autoptr (VbState) state = vb_state_new ();
      g_autoptr (GPtrArray) ops = g_ptr_array_new_with_free_func (g_free);
      guint n = g_rand_int_range (rand, 1, 40);

      for (guint i = 0; i < n; i++)
        {
          g_autofree char *name = g_strdup_printf ("d%u", i);
          g_autofree char *source
              = i > 0 && g_rand_boolean (rand)
                    ? g_strdup_printf ("vblk:d%u", g_rand_int_range (rand, 0, i))
                    : g_strdup_printf ("/img/%u.img", g_rand_int_range (rand, 0, 2 * n));
          add (state, name, source);
          /* now and then a second component: paths shared between devices
           * do not join their parts */
          if (g_rand_int_range (rand, 0, 3) == 0)
            {
              g_autofree char *uuid = g_uuid_string_random ();
              g_autofree char *second
                  = g_strdup_printf ("/img/%u.img", g_rand_int_range (rand, 0, n));
              VbDeviceConfig *d = state->devices->pdata[state->devices->len - 1];
              g_ptr_array_add (d->components, vb_component_config_new (second, "1", uuid));
            }
        }
      for (guint k = 0, n_ops = g_rand_int_range (rand, 1, 4); k < n_ops; k++)
        {
          VbOp *op = g_new0 (VbOp, 1);
          g_autofree char *name = g_strdup_printf ("d%u", g_rand_int_range (rand, 0, n + 2));
          /* now and then a whole-daemon op */
          op->part = round % 10 == 9 && k == 1 ? NULL : part_of (state, name);
          g_ptr_array_add (ops, op);
        }
      g_autoptr (GHashTable) busy = vb_op_parts_busy (state, ops);
      for (guint i = 0; i < n; i++)
        {
          const char *name = ((VbDeviceConfig *) state->devices->pdata[i])->name;
          g_autoptr (GHashTable) part = part_of (state, name);
          gboolean meets = FALSE;

          for (guint k = 0; k < ops->len; k++)
            meets = meets || vb_op_parts_meet (part, ((VbOp *) ops->pdata[k])->part);
          g_assert_cmpint (meets, ==, g_hash_table_contains (busy, name));
        }
      for (guint k = 0; k < ops->len; k++)
        g_clear_pointer (&((VbOp *) ops->pdata[k])->part, g_hash_table_unref);
    }
}

static int
compare_keys (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Sorted "device:" and "source:" keys of @part, one string. */
static char *
keys_of (GHashTable *part)
{
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array (part, NULL);

  qsort (keys, g_hash_table_size (part), sizeof (gpointer), compare_keys);
  return g_strjoinv (" ", (char **) keys);
}

/* vb_op_part_of with the index of the state before (the dispatcher's),
 * which it updates for the configs the mutate replaced or added, gives
 * the part vb_op_part_new builds from both states anew: a device stacked
 * on another by its new config, one no longer, one appended on top. */
static void
test_index_after_mutate (void)
{
  g_autoptr (VbState) previous = sample ();
  g_autoptr (VbState) candidate = vb_state_share (previous);
  g_autoptr (GHashTable) above = vb_op_part_index (previous);
  const char *names[] = { "a", "w", "top", NULL };
  VbComponentConfig *c;
  VbOp op = { 0 };

  /* a now built on c; w no longer on b; top, new, on a */
  c = vb_state_lookup_mut (candidate, "a")->components->pdata[0];
  g_free (c->source);
  c->source = g_strdup ("vblk:c");
  c = vb_state_lookup_mut (candidate, "w")->components->pdata[0];
  g_free (c->source);
  c->source = g_strdup ("/img/w.img");
  add (candidate, "top", "vblk:a");
  op.device = (char *) "a";
  op.previous = previous;
  op.candidate = candidate;
  op.intent.touched = g_ptr_array_new ();
  g_ptr_array_add (op.intent.touched, (gpointer) "w");
  g_ptr_array_add (op.intent.touched, (gpointer) "top");
  op.intent.readds = g_array_new (FALSE, FALSE, sizeof (VbOpReadd));
  op.intent.faults = g_array_new (FALSE, FALSE, sizeof (VbOpFault));
  {
    g_autoptr (GHashTable) derived = vb_op_part_of (&op, above);
    g_autoptr (GHashTable) anew = vb_op_part_new (previous, candidate, names);
    g_autofree char *got = keys_of (derived);
    g_autofree char *want = keys_of (anew);

    g_assert_cmpstr (got, ==, want);
    /* c is in a's part now, through a's new component; b stays, as w's
     * device before the mutate */
    g_assert_true (g_hash_table_contains (derived, "device:c"));
    g_assert_true (g_hash_table_contains (derived, "device:b"));
  }
  /* devices gone: built anew, the same */
  g_ptr_array_remove_index (candidate->devices, vb_state_index_of (candidate, "c"));
  vb_state_reindex (candidate);
  {
    g_autoptr (GHashTable) derived = vb_op_part_of (&op, above);
    g_autoptr (GHashTable) anew = vb_op_part_new (previous, candidate, names);
    g_autofree char *got = keys_of (derived);
    g_autofree char *want = keys_of (anew);

    g_assert_cmpstr (got, ==, want);
  }
  g_ptr_array_unref (op.intent.touched);
  g_array_unref (op.intent.readds);
  g_array_unref (op.intent.faults);
}

static void
test_same_source (void)
{
  g_autoptr (VbState) before = sample ();
  g_autoptr (VbState) after = vb_state_copy (before);
  g_autoptr (GHashTable) a = part_of (before, "a");
  const char *names[] = { "d", NULL };

  /* a new device naming a's path is a's part, for the claim */
  add (after, "d", "/img/a.img");
  g_autoptr (GHashTable) d = vb_op_part_new (before, after, names);
  g_assert_true (vb_op_parts_meet (a, d));
}

static void
test_merge (void)
{
  g_autoptr (VbState) into = sample ();
  g_autoptr (VbState) previous = sample ();
  g_autoptr (VbState) candidate = vb_state_copy (previous);
  g_autoptr (GHashTable) into_running
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
  g_autoptr (GHashTable) op_running
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
  const char *names[] = { "b", NULL };
  VbOp op = { 0 };
  VbDeviceConfig *cb = vb_state_lookup_mut (candidate, "b");
  const char *a_uuid = vb_state_lookup (into, "a")->uuid;
  const char *b_uuid = vb_state_lookup (previous, "b")->uuid;

  /* meanwhile, another op deleted c (the world moved on) */
  g_ptr_array_remove_index (into->devices, vb_state_index_of (into, "c"));
  vb_state_reindex (into);
  g_hash_table_insert (into_running, g_strdup (a_uuid),
                       vb_running_new ("/dev/loop1", "loop", NULL));
  /* this op: b becomes raid1 and starts, w goes */
  g_free (cb->driver);
  cb->driver = g_strdup ("raid1");
  g_ptr_array_remove_index (candidate->devices, vb_state_index_of (candidate, "w"));
  vb_state_reindex (candidate);
  g_hash_table_insert (op_running, g_strdup (b_uuid), vb_running_new ("/dev/loop2", "loop", NULL));
  op.previous = previous;
  op.candidate = candidate;
  op.part = vb_op_part_new (previous, candidate, names);

  vb_op_part_merge_state (&op, into, candidate);
  vb_op_part_merge_running (&op, into_running, op_running);
  g_assert_cmpstr (vb_state_lookup (into, "b")->driver, ==, "raid1");
  g_assert_null (vb_state_lookup (into, "w"));
  g_assert_nonnull (vb_state_lookup (into, "a"));
  /* not this op's: c stays deleted, a keeps running */
  g_assert_null (vb_state_lookup (into, "c"));
  g_assert_true (g_hash_table_contains (into_running, a_uuid));
  g_assert_true (g_hash_table_contains (into_running, b_uuid));
  g_assert_true (vb_op_in_part (&op, "w"));
  g_assert_false (vb_op_in_part (&op, "a"));
  g_hash_table_unref (op.part);
}

/* The two ops, the world and the files of the tests below. */
static void
two_ops_clear (VbOp *ops, VbDaemon *daemon, const char *path, const char *dir)
{
  for (guint i = 0; i < 2; i++)
    {
      vb_state_free (ops[i].previous);
      vb_state_free (ops[i].candidate);
      g_hash_table_unref (ops[i].running);
      g_hash_table_unref (ops[i].part);
    }
  vb_state_free (daemon->world_desired);
  g_hash_table_unref (daemon->world_running);
  g_rec_mutex_clear (&daemon->world_lock);
  g_unlink (vb_state_store_journal_path (daemon->store));
  vb_state_store_free (daemon->store);
  g_unlink (path);
  g_rmdir (dir);
}

/* Two ops on disjoint parts save one after the other: state.json holds
 * both, and the world (what the workers share) takes each save. */
static void
test_world_save (void)
{
  g_autofree char *dir = g_dir_make_tmp ("test-op-part-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "state.json", NULL);
  g_autoptr (VbState) desired = sample ();
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) saved = NULL;
  VbDaemon daemon = { 0 };
  VbOp ops[2] = { { 0 } };
  const char *parts[2] = { "a", "c" };

  daemon.state_path = path;
  daemon.store = vb_state_store_new (path);
  g_clear_pointer (&saved, vb_state_free);
  saved = vb_state_store_load (daemon.store, &error);
  g_assert_no_error (error);
  g_clear_pointer (&saved, vb_state_free);
  g_rec_mutex_init (&daemon.world_lock);
  daemon.world_desired = vb_state_copy (desired);
  daemon.world_running
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
  for (guint i = 0; i < 2; i++)
    {
      const char *names[] = { parts[i], NULL };
      ops[i].daemon = &daemon;
      ops[i].previous = vb_state_copy (desired);
      ops[i].candidate = vb_state_copy (desired);
      ops[i].running = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                              (GDestroyNotify) vb_running_free);
      ops[i].part = vb_op_part_new (ops[i].previous, NULL, names);
      vb_state_lookup_mut (ops[i].candidate, parts[i])->started = TRUE;
    }
  /* each op's copy is stale about the other's device */
  g_assert_true (vb_op_save (&ops[0], &error));
  g_assert_no_error (error);
  g_assert_true (vb_op_save (&ops[1], &error));
  g_assert_no_error (error);
  vb_op_world_take (&ops[0]);

  /* the second save is a journal record: read as vblkd loads it */
  saved = vb_state_read (path, &error);
  g_assert_no_error (error);
  g_assert_true (vb_state_lookup (saved, "a")->started);
  g_assert_true (vb_state_lookup (saved, "c")->started);
  g_assert_false (vb_state_lookup (saved, "b")->started);
  g_assert_true (vb_state_lookup (daemon.world_desired, "a")->started);
  g_assert_true (vb_state_lookup (daemon.world_desired, "c")->started);

  two_ops_clear (ops, &daemon, path, dir);
}

/* Two ops create devices at once and save one after the other: each
 * new device comes last in the world, after the other op's, so both
 * saves are journal records (state.json stays as it was) and the world
 * and state.json hold them all, in the order of the saves and, within
 * one op, of its candidate (the first makes x, then x2). */
static void
test_create_together (void)
{
  g_autofree char *dir = g_dir_make_tmp ("test-op-part-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "state.json", NULL);
  g_autoptr (VbState) desired = sample ();
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) saved = NULL;
  g_autofree char *before = NULL, *after = NULL;
  VbDaemon daemon = { 0 };
  VbOp ops[2] = { { 0 } };
  const char *made[2] = { "x", "y" };

  daemon.state_path = path;
  daemon.store = vb_state_store_new (path);
  saved = vb_state_store_load (daemon.store, &error);
  g_assert_no_error (error);
  g_assert_true (vb_state_store_commit (daemon.store, desired, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &before, NULL, NULL));
  g_rec_mutex_init (&daemon.world_lock);
  daemon.world_desired = vb_state_share (desired);
  daemon.world_running
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
  for (guint i = 0; i < 2; i++)
    {
      const char *names[] = { made[i], i == 0 ? "x2" : NULL, NULL };
      g_autofree char *source = g_strdup_printf ("/img/%s.img", made[i]);
      ops[i].daemon = &daemon;
      ops[i].previous = vb_state_share (desired);
      ops[i].candidate = vb_state_share (desired);
      add (ops[i].candidate, made[i], source);
      if (i == 0)
        add (ops[i].candidate, "x2", "/img/x2.img");
      ops[i].running = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                              (GDestroyNotify) vb_running_free);
      ops[i].part = vb_op_part_new (ops[i].previous, ops[i].candidate, names);
    }
  /* the second op's candidate has y where the world already has x */
  for (guint i = 0; i < 2; i++)
    {
      g_assert_true (vb_op_save (&ops[i], &error));
      g_assert_no_error (error);
    }

  g_assert_true (g_file_get_contents (path, &after, NULL, NULL));
  g_assert_cmpstr (before, ==, after);
  g_assert_true (g_file_test (vb_state_store_journal_path (daemon.store), G_FILE_TEST_EXISTS));
  g_clear_pointer (&saved, vb_state_free);
  saved = vb_state_read (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (saved->devices->len, ==, 7);
  g_assert_cmpint (vb_state_index_of (saved, "x"), ==, 4);
  g_assert_cmpint (vb_state_index_of (saved, "x2"), ==, 5);
  g_assert_cmpint (vb_state_index_of (saved, "y"), ==, 6);
  g_assert_cmpint (vb_state_index_of (daemon.world_desired, "x"), ==, 4);
  g_assert_cmpint (vb_state_index_of (daemon.world_desired, "x2"), ==, 5);
  g_assert_cmpint (vb_state_index_of (daemon.world_desired, "y"), ==, 6);

  two_ops_clear (ops, &daemon, path, dir);
}

int
main (int argc, char **argv)
{
  /* the checks against a scan, as in the integration tests: a derived
   * dependents index that differs from one built anew is a critical */
  g_setenv ("VBLK_TEST_FROZEN", "1", TRUE);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/op-part/connected", test_connected);
  g_test_add_func ("/op-part/index-after-mutate", test_index_after_mutate);
  g_test_add_func ("/op-part/same-source", test_same_source);
  g_test_add_func ("/op-part/busy", test_busy);
  g_test_add_func ("/op-part/merge", test_merge);
  g_test_add_func ("/op-part/world-save", test_world_save);
  g_test_add_func ("/op-part/create-together", test_create_together);
  return g_test_run ();
}
