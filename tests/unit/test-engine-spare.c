/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A spare taking a failed slot while the slot's disk is being let go: the
 * disk went away (vblkd fails the slot, then lets go of its file and
 * records it missing once its failure is recorded), and the spare thread
 * put the spare in the slot between the two. Recording the disk missing
 * must neither wait for ever — for a recorded failure of a slot that holds
 * a healthy spare now — nor mark the spare's slot missing, even once the
 * spare has failed in turn. The torture
 * test found vblkd's operations stuck there (seed 2, raid10, bitmap none,
 * step 43: a hot-remove; the spare's move was never recorded). */
#include "config.h"

#include "engine-meta.h"
#include "engine.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <unistd.h>

#define LEG_SIZE (8u << 20)
#define DATA_OFFSET (1u << 20)

static const char *const device_uuid = "5e1f0c3a-2b4d-4e6f-8a9b-0c1d2e3f4a5b";
static const char *const leg_uuids[]
    = { "b0000000-0000-4000-8000-000000000001", "b0000000-0000-4000-8000-000000000002", NULL };
static const char *const spare_uuid = "b0000000-0000-4000-8000-000000000003";

typedef struct {
  VbEngine *e;
  gint returned; /* atomic */
} Gone;

static gpointer
record_gone (gpointer data)
{
  Gone *g = data;

  engine_meta_record_gone (g->e, 1, leg_uuids[1]);
  g_atomic_int_set (&g->returned, 1);
  return NULL;
}

static void
test_spare_before_gone (void)
{
  g_autofree char *dir = g_dir_make_tmp ("vblk-engine-spare-XXXXXX", NULL);
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) attrs = NULL;
  g_autoptr (GError) error = NULL;
  char *paths[3];
  VbEngineSource sources[2] = { 0 };
  VbComponentInfo infos[2] = { 0 };
  const char *spare_paths[1], *spare_uuids[1] = { spare_uuid };
  VbEngineIdentity id = { device_uuid, leg_uuids, 1, spare_paths, spare_uuids };
  Gone g = { 0 };
  GThread *t;
  VbEngine *e;

  g_assert_nonnull (dir);
  for (guint i = 0; i < 3; i++)
    {
      int fd;
      paths[i] = g_strdup_printf ("%s/%s%u.img", dir, i < 2 ? "leg" : "spare", i);
      fd = open (paths[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpint (ftruncate (fd, LEG_SIZE), ==, 0);
      close (fd);
    }
  for (guint i = 0; i < 2; i++)
    {
      sources[i].path = paths[i];
      infos[i] = (VbComponentInfo){ paths[i], VB_COMPONENT_KIND_FILE, LEG_SIZE - DATA_OFFSET };
    }
  spare_paths[0] = paths[2];
  g_hash_table_insert (given, "bitmap", "none");
  attrs = vb_driver_resolve_attributes (vb_driver_lookup ("raid1"), NULL, given, &error);
  g_assert_no_error (error);
  e = vb_engine_new ("s", vb_driver_lookup ("raid1"), attrs, 2, sources, infos, &id, FALSE, &error);
  g_assert_no_error (error);
  vb_engine_activate (e);

  /* the slot fails (its failure recorded), and the spare takes it */
  g_assert_cmpint (vb_engine_set_faulty (e, 1), ==, 0);
  for (guint i = 0; i < 1000 && vb_engine_component_faulty (e, 1); i++)
    g_usleep (10000);
  g_assert_false (vb_engine_component_faulty (e, 1));
  g_assert_cmpstr (vb_engine_component_path (e, 1), ==, paths[2]);

  /* then the let-go of the old disk records it missing */
  g.e = e;
  t = g_thread_new ("gone", record_gone, &g);
  for (guint i = 0; i < 500 && !g_atomic_int_get (&g.returned); i++)
    g_usleep (10000);
  g_assert_true (g_atomic_int_get (&g.returned));
  g_thread_join (t);
  g_assert_cmpint (engine_meta_role_state (e, 1), !=, VB_ROLE_MISSING);
  g_assert_false (vb_engine_component_faulty (e, 1));

  /* the spare fails in turn (there, not gone): the old disk's going must
   * not mark it missing, which would have it re-added on its own */
  g_assert_cmpint (vb_engine_set_faulty (e, 1), ==, 0);
  engine_meta_record_gone (e, 1, leg_uuids[1]);
  g_assert_cmpint (engine_meta_role_state (e, 1), ==, VB_ROLE_FAULTY);

  vb_engine_free (e);
  for (guint i = 0; i < 3; i++)
    {
      g_unlink (paths[i]);
      g_free (paths[i]);
    }
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/engine-spare/taken-before-the-gone-disk-is-recorded", test_spare_before_gone);
  return g_test_run ();
}
