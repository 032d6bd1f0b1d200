/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Scan's grouping (vb-scan.c) with superblocks built in memory:
 * grouping by device UUID, the newest superblock winning, stale marks,
 * each problem that refuses adoption, the device adoption would add, the
 * D-Bus result; a stack's upper level found on its lower devices' nodes
 * (adopted as vblk:NAME) and the nodes read next; and reading real files
 * (no superblock, a bad one, a path that is not there, one file under two
 * names). */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "superblock.h"
#include "vb-scan.h"
#include "vb-util.h"

#define DEV_M "11111111-1111-4111-8111-111111111111"
#define DEV_T "22222222-2222-4222-8222-222222222222"
#define M0 "aaaaaaaa-0000-4000-8000-000000000000"
#define M1 "aaaaaaaa-0000-4000-8000-000000000001"
#define MS "aaaaaaaa-0000-4000-8000-00000000000f"
#define T0 "bbbbbbbb-0000-4000-8000-000000000000"
#define T1 "bbbbbbbb-0000-4000-8000-000000000001"
#define T2 "bbbbbbbb-0000-4000-8000-000000000002"

/* A superblock of device @dev: the component @self in @role, slots @slots. */
static void
make_sb (VbSuperblock *sb, const char *dev, const char *name, const char *driver,
         const char *attributes, const char *self, gint32 role, guint64 events,
         const char *const *slots)
{
  memset (sb, 0, sizeof *sb);
  sb->version = 1;
  g_strlcpy (sb->device_uuid, dev, sizeof sb->device_uuid);
  g_strlcpy (sb->device_name, name, sizeof sb->device_name);
  g_strlcpy (sb->component_uuid, self, sizeof sb->component_uuid);
  sb->role = role;
  g_strlcpy (sb->driver, driver, sizeof sb->driver);
  g_strlcpy (sb->attributes, attributes, sizeof sb->attributes);
  sb->events = events;
  sb->clean = TRUE;
  sb->data_offset = VB_DATA_OFFSET_DEFAULT;
  sb->data_size = 31 << 20;
  sb->n_roles = g_strv_length ((char **) slots);
  for (guint i = 0; slots[i]; i++)
    {
      g_strlcpy (sb->roles[i].uuid, slots[i], sizeof sb->roles[i].uuid);
      sb->roles[i].state = *slots[i] ? VB_ROLE_IN_SYNC : VB_ROLE_MISSING;
    }
}

static const char *const m_slots[] = { M0, M1, NULL };
static const char *const t_slots[] = { T0, T1, T2, NULL };
#define M_ATTRS "bitmap=internal\nbitmap_chunk=1048576\nmetadata=vblk\n"
#define T_ATTRS "chunk_size=65536\ncopies=2\nmetadata=vblk\n"

static void
add_m (VbScan *scan, const char *path, const char *self, gint32 role, guint64 events)
{
  VbSuperblock sb;

  make_sb (&sb, DEV_M, "m", "raid1", M_ATTRS, self, role, events, m_slots);
  vb_scan_add (scan, path, &sb);
}

static void
add_t (VbScan *scan, const char *path, const char *self, gint32 role, guint64 events)
{
  VbSuperblock sb;

  make_sb (&sb, DEV_T, "t", "raid10", T_ATTRS, self, role, events, t_slots);
  vb_scan_add (scan, path, &sb);
}

static VbScanGroup *
group (VbScan *scan, guint i)
{
  g_assert_cmpuint (i, <, scan->groups->len);
  return scan->groups->pdata[i];
}

static VbScanComponent *
component (VbScanGroup *g, guint i)
{
  g_assert_cmpuint (i, <, g->components->len);
  return g->components->pdata[i];
}

static gboolean
has_problem (VbScanGroup *g, const char *part)
{
  for (guint i = 0; i < g->problems->len; i++)
    if (strstr (g->problems->pdata[i], part))
      return TRUE;
  return FALSE;
}

static void
assert_component (const VbDeviceConfig *d, guint i, const char *source, const char *role,
                  const char *uuid)
{
  const VbComponentConfig *c;

  g_assert_cmpuint (i, <, d->components->len);
  c = d->components->pdata[i];
  g_assert_cmpstr (c->source, ==, source);
  g_assert_cmpstr (c->role, ==, role);
  g_assert_cmpstr (c->uuid, ==, uuid);
}

/* Two devices, a stale component and a spare: grouped, ordered, adoptable. */
static void
test_two_devices (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  VbScanGroup *m, *t;

  /* read in an order unlike the result's */
  add_t (scan, "/t2", T2, 2, 7);
  add_m (scan, "/s", MS, VB_SB_ROLE_SPARE, 9);
  add_m (scan, "/b", M1, 1, 5);
  add_t (scan, "/t0", T0, 0, 7);
  add_m (scan, "/a", M0, 0, 9);
  add_t (scan, "/t1", T1, 1, 7);
  vb_scan_group (scan, desired);

  g_assert_cmpuint (scan->groups->len, ==, 2);
  m = group (scan, 0);
  t = group (scan, 1);
  g_assert_cmpstr (m->uuid, ==, DEV_M);
  g_assert_cmpstr (t->uuid, ==, DEV_T);
  g_assert_cmpuint (m->best->events, ==, 9);
  g_assert_cmpuint (m->problems->len, ==, 0);
  g_assert_null (m->known_name);

  /* slots by role, then the spare; only b is behind */
  g_assert_cmpstr (component (m, 0)->path, ==, "/a");
  g_assert_cmpstr (component (m, 1)->path, ==, "/b");
  g_assert_cmpstr (component (m, 2)->path, ==, "/s");
  g_assert_false (component (m, 0)->stale);
  g_assert_true (component (m, 1)->stale);
  g_assert_false (component (m, 2)->stale);

  g_assert_nonnull (m->config);
  g_assert_cmpstr (m->config->name, ==, "m");
  g_assert_cmpstr (m->config->uuid, ==, DEV_M);
  g_assert_cmpstr (m->config->driver, ==, "raid1");
  g_assert_cmpstr (m->config->backend, ==, "auto");
  g_assert_true (m->config->autostart);
  g_assert_false (m->config->started);
  g_assert_cmpstr (g_hash_table_lookup (m->config->attributes, "bitmap_chunk"), ==, "1048576");
  /* defaults filled in for what the superblock did not say */
  g_assert_nonnull (g_hash_table_lookup (m->config->attributes, "sync_speed_max"));
  g_assert_cmpuint (m->config->components->len, ==, 3);
  assert_component (m->config, 0, "/a", "0", M0);
  assert_component (m->config, 1, "/b", "1", M1);
  assert_component (m->config, 2, "/s", "spare", MS);

  g_assert_nonnull (t->config);
  g_assert_cmpuint (t->config->components->len, ==, 3);
  assert_component (t->config, 0, "/t0", "0", T0);
  assert_component (t->config, 2, "/t2", "2", T2);
  g_assert_cmpstr (g_hash_table_lookup (t->config->attributes, "chunk_size"), ==, "65536");

  /* neither known nor adopted: no object path */
  {
    g_auto (GStrv) paths = vb_scan_device_paths (scan);
    g_assert_cmpuint (g_strv_length (paths), ==, 0);
  }
  /* grouping again gives the same (the adopt op regroups) */
  vb_scan_group (scan, desired);
  g_assert_cmpuint (scan->groups->len, ==, 2);
  g_assert_nonnull (group (scan, 0)->config);
}

/* The newest superblock's slot table decides, even when an older one
 * names another component for a slot. */
static void
test_newest_wins (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  static const char *const old_slots[] = { M0, MS, NULL };
  VbSuperblock sb;
  VbScanGroup *g;

  /* s took slot 1 (events 12); b still says it is slot 1 (events 5) */
  make_sb (&sb, DEV_M, "m", "raid1", M_ATTRS, M0, 0, 12, old_slots);
  vb_scan_add (scan, "/a", &sb);
  make_sb (&sb, DEV_M, "m", "raid1", M_ATTRS, MS, 1, 12, old_slots);
  vb_scan_add (scan, "/s", &sb);
  add_m (scan, "/b", M1, 1, 5);
  vb_scan_group (scan, desired);

  g = group (scan, 0);
  g_assert_cmpuint (g->best->events, ==, 12);
  g_assert_cmpuint (g->problems->len, ==, 0);
  g_assert_nonnull (g->config);
  g_assert_cmpuint (g->config->components->len, ==, 2);
  assert_component (g->config, 0, "/a", "0", M0);
  assert_component (g->config, 1, "/s", "1", MS);
  /* b is shown, stale, but not adopted */
  g_assert_cmpuint (g->components->len, ==, 3);
  g_assert_cmpstr (component (g, 1)->path, ==, "/b");
  g_assert_true (component (g, 1)->stale);
}

static void
test_missing_slot (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  VbScanGroup *g;

  add_m (scan, "/a", M0, 0, 9);
  vb_scan_group (scan, desired);
  g = group (scan, 0);
  g_assert_null (g->config);
  g_assert_cmpuint (g->problems->len, ==, 1);
  g_assert_cmpstr (g->problems->pdata[0], ==, "slot 1 (" M1 "): no component found");
}

static void
test_role_conflict (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  static const char *const forged[] = { MS, M1, NULL };
  VbSuperblock sb;
  VbScanGroup *g;

  add_m (scan, "/a", M0, 0, 5);
  add_m (scan, "/b", M1, 1, 5);
  make_sb (&sb, DEV_M, "m", "raid1", M_ATTRS, MS, 0, 5, forged);
  vb_scan_add (scan, "/x", &sb);
  vb_scan_group (scan, desired);
  g = group (scan, 0);
  g_assert_null (g->config);
  g_assert_true (has_problem (g, "two components claim role 0 at events 5"));
  g_assert_true (has_problem (g, "'/a'"));
  g_assert_true (has_problem (g, "'/x'"));

  /* the same role at different events is no conflict: the older is stale */
  g_ptr_array_set_size (scan->components, 2);
  make_sb (&sb, DEV_M, "m", "raid1", M_ATTRS, MS, 0, 4, forged);
  vb_scan_add (scan, "/x", &sb);
  vb_scan_group (scan, desired);
  g = group (scan, 0);
  g_assert_cmpuint (g->problems->len, ==, 0);
  g_assert_nonnull (g->config);
}

static void
test_same_component_twice (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  VbScanGroup *g;

  add_m (scan, "/a", M0, 0, 5);
  add_m (scan, "/b", M1, 1, 5);
  add_m (scan, "/copy-of-a", M0, 0, 5);
  vb_scan_group (scan, desired);
  g = group (scan, 0);
  g_assert_null (g->config);
  g_assert_true (has_problem (g, "component " M0 " is at two paths"));
}

static void
test_known (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  g_auto (GStrv) paths = NULL;
  g_autofree char *expect = vb_device_object_path ("renamed");
  VbScanGroup *g;

  g_ptr_array_add (desired->devices, vb_device_config_new ("renamed", DEV_M, "raid1", "auto"));
  add_m (scan, "/a", M0, 0, 5);
  vb_scan_group (scan, desired);
  g = group (scan, 0);
  g_assert_cmpstr (g->known_name, ==, "renamed");
  g_assert_null (g->config);
  /* what is missing is still shown */
  g_assert_true (has_problem (g, "slot 1"));
  paths = vb_scan_device_paths (scan);
  g_assert_cmpuint (g_strv_length (paths), ==, 1);
  g_assert_cmpstr (paths[0], ==, expect);
}

static void
test_name_taken (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  VbScanGroup *g;

  g_ptr_array_add (desired->devices, vb_device_config_new ("m", DEV_T, "raid10", "auto"));
  add_m (scan, "/a", M0, 0, 5);
  add_m (scan, "/b", M1, 1, 5);
  vb_scan_group (scan, desired);
  g = group (scan, 0);
  g_assert_null (g->config);
  g_assert_cmpuint (g->problems->len, ==, 1);
  g_assert_cmpstr (g->problems->pdata[0], ==, "name 'm' is taken by another device");
}

/* Two unknown devices of one name: neither is adopted. */
static void
test_name_twice_in_scan (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  static const char *const one[] = { T0, NULL };
  VbSuperblock sb;

  add_m (scan, "/a", M0, 0, 5);
  add_m (scan, "/b", M1, 1, 5);
  make_sb (&sb, DEV_T, "m", "raid1", M_ATTRS, T0, 0, 3, one);
  vb_scan_add (scan, "/c", &sb);
  vb_scan_group (scan, desired);
  g_assert_cmpuint (scan->groups->len, ==, 2);
  for (guint i = 0; i < 2; i++)
    {
      g_assert_null (group (scan, i)->config);
      g_assert_true (has_problem (group (scan, i), "found in this scan"));
    }
}

static void
test_bad_driver_and_attributes (void)
{
  static const char *const one[] = { T0, NULL };
  static const struct {
    const char *driver, *attributes, *problem;
  } cases[] = {
    { "raid7", "", "driver 'raid7': unknown" },
    { "raid1", "no_such_attribute=1\n", "no_such_attribute" },
    { "raid1", "bitmap_chunk=12345\n", "bitmap_chunk" },
    { "raid1", "garbage\n", "'garbage' is not KEY=VALUE" },
    { "raid10", "", "takes 2 to" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (VbScan) scan = vb_scan_new ();
      g_autoptr (VbState) desired = vb_state_new ();
      VbSuperblock sb;
      VbScanGroup *g;

      make_sb (&sb, DEV_T, "t", cases[i].driver, cases[i].attributes, T0, 0, 3, one);
      vb_scan_add (scan, "/t0", &sb);
      vb_scan_group (scan, desired);
      g = group (scan, 0);
      g_assert_null (g->config);
      if (!has_problem (g, cases[i].problem))
        g_error ("case %zu: no problem with '%s' in %u problems (first: %s)", i, cases[i].problem,
                 g->problems->len, g->problems->len ? (char *) g->problems->pdata[0] : "");
    }
}

static void
test_variant (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  g_autoptr (GVariant) found = NULL;
  g_autoptr (GVariant) first = NULL;
  g_autoptr (GVariant) last = NULL;
  g_autoptr (GVariant) components = NULL;
  g_autoptr (GVariant) c1 = NULL;
  g_autofree const char **problems = NULL;
  const char *s;
  guint64 t;
  gint32 role;
  gboolean b;

  add_m (scan, "/a", M0, 0, 9);
  add_m (scan, "/b", M1, 1, 5);
  vb_scan_add_problem (scan, "/bad", "'/bad': superblock checksum mismatch");
  vb_scan_group (scan, desired);
  ((VbScanGroup *) scan->groups->pdata[0])->adopted = TRUE;
  found = g_variant_ref_sink (vb_scan_found_variant (scan));
  g_assert_cmpstr (g_variant_get_type_string (found), ==, "aa{sv}");
  g_assert_cmpuint (g_variant_n_children (found), ==, 2);

  first = g_variant_get_child_value (found, 0);
  g_assert_true (g_variant_lookup (first, "uuid", "&s", &s));
  g_assert_cmpstr (s, ==, DEV_M);
  g_assert_true (g_variant_lookup (first, "name", "&s", &s));
  g_assert_cmpstr (s, ==, "m");
  g_assert_true (g_variant_lookup (first, "driver", "&s", &s));
  g_assert_cmpstr (s, ==, "raid1");
  g_assert_true (g_variant_lookup (first, "events", "t", &t));
  g_assert_cmpuint (t, ==, 9);
  g_assert_true (g_variant_lookup (first, "known", "b", &b));
  g_assert_false (b);
  g_assert_true (g_variant_lookup (first, "adopted", "b", &b));
  g_assert_true (b);
  g_assert_true (g_variant_lookup (first, "device", "&o", &s));
  g_assert_cmpstr (s, ==, "/org/vblk/VBlk1/devices/m");
  components = g_variant_lookup_value (first, "components", G_VARIANT_TYPE ("aa{sv}"));
  g_assert_nonnull (components);
  g_assert_cmpuint (g_variant_n_children (components), ==, 2);
  c1 = g_variant_get_child_value (components, 1);
  g_assert_true (g_variant_lookup (c1, "path", "&s", &s));
  g_assert_cmpstr (s, ==, "/b");
  g_assert_true (g_variant_lookup (c1, "role", "i", &role));
  g_assert_cmpint (role, ==, 1);
  g_assert_true (g_variant_lookup (c1, "events", "t", &t));
  g_assert_cmpuint (t, ==, 5);
  g_assert_true (g_variant_lookup (c1, "stale", "b", &b));
  g_assert_true (b);
  g_assert_true (g_variant_lookup (first, "problems", "^a&s", &problems));
  g_assert_cmpuint (g_strv_length ((char **) problems), ==, 0);
  g_clear_pointer (&problems, g_free);

  /* a path that could not be read: no uuid, a problem naming it */
  last = g_variant_get_child_value (found, 1);
  g_assert_false (g_variant_lookup (last, "uuid", "&s", &s));
  g_assert_true (g_variant_lookup (last, "path", "&s", &s));
  g_assert_cmpstr (s, ==, "/bad");
  g_assert_true (g_variant_lookup (last, "problems", "^a&s", &problems));
  g_assert_cmpstr (problems[0], ==, "'/bad': superblock checksum mismatch");
}

/* Reading real files: a superblock, none, a bad one, nothing there, one
 * file under two names, a directory. */
static void
test_read_files (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("vb-scan-XXXXXX", &error);
  g_autofree char *good = g_build_filename (dir, "good.img", NULL);
  g_autofree char *link = g_build_filename (dir, "link.img", NULL);
  g_autofree char *blank = g_build_filename (dir, "blank.img", NULL);
  g_autofree char *small = g_build_filename (dir, "small.img", NULL);
  g_autofree char *bad = g_build_filename (dir, "bad.img", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing.img", NULL);
  const char *paths[] = { good, link, blank, small, bad, missing, dir, NULL };
  g_autofree char *contents = NULL;
  gsize length;
  VbSuperblock sb;

  g_assert_no_error (error);
  make_sb (&sb, DEV_M, "m", "raid1", M_ATTRS, M0, 0, 9, m_slots);
  g_assert_true (g_file_set_contents (good, "", 0, NULL));
  g_assert_cmpint (truncate (good, 2 << 20), ==, 0);
  g_assert_true (vb_superblock_write (-1, good, &sb, &error));
  g_assert_no_error (error);
  g_assert_cmpint (symlink (good, link), ==, 0);
  g_assert_true (g_file_set_contents (blank, "", 0, NULL));
  g_assert_cmpint (truncate (blank, 2 << 20), ==, 0);
  g_assert_true (g_file_set_contents (small, "tiny", 4, NULL));
  /* a flipped byte in the superblock: the checksum fails */
  g_assert_true (g_file_get_contents (good, &contents, &length, NULL));
  contents[VB_SB_OFFSET + VB_SB_OFF_DEVICE_NAME] ^= 0x55;
  g_assert_true (g_file_set_contents (bad, contents, length, NULL));

  {
    g_autoptr (VbScan) scan = vb_scan_new ();

    vb_scan_read (scan, paths, TRUE);
    g_assert_cmpuint (scan->components->len, ==, 1);
    g_assert_cmpstr (((VbScanComponent *) scan->components->pdata[0])->path, ==, good);
    g_assert_cmpstr (((VbScanComponent *) scan->components->pdata[0])->sb.device_uuid, ==, DEV_M);
    /* bad, missing and the directory, each naming its path */
    g_assert_cmpuint (scan->path_problems->len, ==, 6);
    g_assert_cmpstr (scan->path_problems->pdata[0], ==, bad);
    g_assert_nonnull (strstr (scan->path_problems->pdata[1], bad));
    g_assert_nonnull (strstr (scan->path_problems->pdata[1], "checksum"));
    g_assert_cmpstr (scan->path_problems->pdata[2], ==, missing);
    g_assert_nonnull (strstr (scan->path_problems->pdata[3], missing));
    g_assert_cmpstr (scan->path_problems->pdata[4], ==, dir);
  }
  {
    /* the default scan passes over what is not there */
    g_autoptr (VbScan) scan = vb_scan_new ();
    const char *defaults[] = { missing, dir, good, NULL };

    vb_scan_read (scan, defaults, FALSE);
    g_assert_cmpuint (scan->components->len, ==, 1);
    g_assert_cmpuint (scan->path_problems->len, ==, 0);
  }

  for (guint i = 0; i < G_N_ELEMENTS (paths) - 2; i++)
    g_unlink (paths[i]);
  g_rmdir (dir);
}

/* The default paths end with the extra ones, after /dev nodes. */
static void
test_default_paths (void)
{
  const char *extra[] = { "/srv/a.img", "/srv/b.img", NULL };
  g_auto (GStrv) paths = vb_scan_default_paths (extra);
  guint n = g_strv_length (paths);

  g_assert_cmpuint (n, >=, 2);
  g_assert_cmpstr (paths[n - 2], ==, "/srv/a.img");
  g_assert_cmpstr (paths[n - 1], ==, "/srv/b.img");
  for (guint i = 0; i + 2 < n; i++)
    g_assert_true (g_str_has_prefix (paths[i], "/dev/"));
}

/* What a start would make of each component is the assembly rule's
 * answer (assembly.h), as the engine and md apply it. */
static void
test_start_decision (void)
{
  static const struct {
    guint64 b_events;
    VbRoleState b_state; /* in the newest superblock's table */
    VbSlotDecision want;
  } cases[] = {
    { 9, VB_ROLE_IN_SYNC, VB_SLOT_CURRENT },
    { 7, VB_ROLE_IN_SYNC, VB_SLOT_RESYNC },  /* the bitmap kept every bit since */
    { 6, VB_ROLE_IN_SYNC, VB_SLOT_REBUILD }, /* bits it missed were cleared */
    { 7, VB_ROLE_MISSING, VB_SLOT_RESYNC },
    { 7, VB_ROLE_FAULTY, VB_SLOT_FAULTY }, /* until an explicit re-add */
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (VbScan) scan = vb_scan_new ();
      g_autoptr (VbState) desired = vb_state_new ();
      VbSuperblock a, b;

      make_sb (&a, DEV_M, "m", "raid1", M_ATTRS, M0, 0, 9, m_slots);
      a.features = VB_SB_FEATURE_BITMAP | VB_SB_FEATURE_EVENTS_CLEARED;
      a.bitmap_chunk = 1 << 20;
      a.bitmap_bytes = 4096;
      a.events_cleared = 7;
      a.roles[1].state = cases[i].b_state;
      make_sb (&b, DEV_M, "m", "raid1", M_ATTRS, M1, 1, cases[i].b_events, m_slots);
      b.features = a.features;
      b.bitmap_chunk = a.bitmap_chunk;
      b.bitmap_bytes = a.bitmap_bytes;
      b.events_cleared = MIN (7, cases[i].b_events);
      vb_scan_add (scan, "/a", &a);
      vb_scan_add (scan, "/b", &b);
      vb_scan_group (scan, desired);
      g_assert_cmpint (component (group (scan, 0), 0)->decision, ==, VB_SLOT_CURRENT);
      g_assert_cmpint (component (group (scan, 0), 1)->decision, ==, cases[i].want);
      g_assert_cmpint (component (group (scan, 0), 1)->stale, ==, cases[i].want != VB_SLOT_CURRENT);
    }
}

/* A stack: raid0 "r0" over raid1 "r1a" (running on a loop device) and
 * raid1 "r1b" (an md array, whose node's tag carries 16 hex digits of its
 * UUID). r0's superblocks are on their nodes: adopted as vblk:NAME. */
#define DEV_A "a1a1a1a1-0000-4000-8000-00000000000a"
#define DEV_B "b1b1b1b1-0000-4000-8000-00000000000b"
#define DEV_R "c0c0c0c0-0000-4000-8000-0000000000c0"
#define R0 "cccccccc-0000-4000-8000-000000000000"
#define R1 "cccccccc-0000-4000-8000-000000000001"
#define R0_ATTRS "chunk_size=65536\nmetadata=vblk\n"

static const char *const r_slots[] = { R0, R1, NULL };

static void
add_r (VbScan *scan, const char *path, const char *self, gint32 role, const char *node_of)
{
  VbSuperblock sb;

  make_sb (&sb, DEV_R, "r0", "raid0", R0_ATTRS, self, role, 4, r_slots);
  vb_scan_add_node (scan, path, &sb, node_of);
}

static void
test_stack (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  g_autoptr (GHashTable) nodes = g_hash_table_new (g_str_hash, g_str_equal);
  g_auto (GStrv) next = NULL;
  VbScanGroup *r;

  scan->instance = g_strdup ("0123abcd");
  g_ptr_array_add (desired->devices, vb_device_config_new ("r1a", DEV_A, "raid1", "loop"));
  g_ptr_array_add (desired->devices, vb_device_config_new ("r1b", DEV_B, "raid1", "kernel"));
  add_r (scan, "/dev/loop7", R0, 0, DEV_A);
  add_r (scan, "/dev/md_vb0123abcd_b1b1b1b100004000", R1, 1, "b1b1b1b100004000");
  vb_scan_group (scan, desired);

  g_assert_cmpuint (scan->groups->len, ==, 1);
  r = group (scan, 0);
  g_assert_cmpuint (r->problems->len, ==, 0);
  g_assert_nonnull (r->config);
  g_assert_cmpstr (r->config->driver, ==, "raid0");
  g_assert_cmpstr (g_hash_table_lookup (r->config->attributes, "metadata"), ==, "vblk");
  g_assert_cmpstr (g_hash_table_lookup (r->config->attributes, "chunk_size"), ==, "65536");
  /* built on the devices, never on their raw nodes */
  assert_component (r->config, 0, "vblk:r1a", "0", R0);
  assert_component (r->config, 1, "vblk:r1b", "1", R1);

  /* the next level is read from the nodes of the devices found that run,
   * once */
  g_hash_table_insert (nodes, "r0", "/dev/loop9");
  g_hash_table_insert (nodes, "r1a", "/dev/loop7");
  r->adopted = TRUE;
  next = vb_scan_next_nodes (scan, nodes);
  g_assert_cmpuint (g_strv_length (next), ==, 1);
  g_assert_cmpstr (next[0], ==, "/dev/loop9");
  g_hash_table_add (scan->looked, g_strdup ("/dev/loop9"));
  g_strfreev (next);
  next = vb_scan_next_nodes (scan, nodes);
  g_assert_cmpuint (g_strv_length (next), ==, 0);
}

/* A component on the node of a device this vblkd does not know (left
 * running, or another state's): no adoption, the problem named. */
static void
test_stack_unknown_node (void)
{
  g_autoptr (VbScan) scan = vb_scan_new ();
  g_autoptr (VbState) desired = vb_state_new ();
  VbScanGroup *r;

  scan->instance = g_strdup ("0123abcd");
  g_ptr_array_add (desired->devices, vb_device_config_new ("r1a", DEV_A, "raid1", "loop"));
  add_r (scan, "/dev/loop7", R0, 0, DEV_A);
  add_r (scan, "/dev/loop8", R1, 1, DEV_B);
  vb_scan_group (scan, desired);
  r = group (scan, 0);
  g_assert_null (r->config);
  g_assert_true (has_problem (r, "'/dev/loop8' is the block node of a device vblkd does not know"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/scan/two-devices", test_two_devices);
  g_test_add_func ("/scan/start-decision", test_start_decision);
  g_test_add_func ("/scan/newest-wins", test_newest_wins);
  g_test_add_func ("/scan/missing-slot", test_missing_slot);
  g_test_add_func ("/scan/role-conflict", test_role_conflict);
  g_test_add_func ("/scan/same-component-twice", test_same_component_twice);
  g_test_add_func ("/scan/known", test_known);
  g_test_add_func ("/scan/name-taken", test_name_taken);
  g_test_add_func ("/scan/name-twice-in-scan", test_name_twice_in_scan);
  g_test_add_func ("/scan/bad-driver-and-attributes", test_bad_driver_and_attributes);
  g_test_add_func ("/scan/variant", test_variant);
  g_test_add_func ("/scan/read-files", test_read_files);
  g_test_add_func ("/scan/default-paths", test_default_paths);
  g_test_add_func ("/scan/stack", test_stack);
  g_test_add_func ("/scan/stack-unknown-node", test_stack_unknown_node);
  return g_test_run ();
}
