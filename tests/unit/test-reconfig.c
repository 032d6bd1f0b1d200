/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure planner of online reconfiguration (vb-reconfig.c): which
 * conversions exist, the configuration each one produces (driver,
 * attributes, components with their roles, order, behind flags and UUIDs)
 * and the exact error of each refusal. Every plan also checks that the old
 * configuration is left as it was. No root, no files. */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "driver.h"
#include "vb-error.h"
#include "vb-reconfig.h"
#include "vb-util.h"

/* attributes as given: key, value, ..., NULL */
static GHashTable *
attrs_new (const char *key, ...)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  va_list ap;

  va_start (ap, key);
  for (const char *k = key; k; k = va_arg (ap, const char *))
    {
      const char *v = va_arg (ap, const char *);
      g_hash_table_insert (h, g_strdup (k), g_strdup (v));
    }
  va_end (ap);
  return h;
}

#define A(...) attrs_new (__VA_ARGS__, NULL)
/* a NULL-terminated list of sources, or of source, role pairs */
#define L(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Attributes resolved the way the daemon keeps them: canonical, with
 * every default. Takes @given. */
static GHashTable *
resolved (const char *driver, GHashTable *given)
{
  g_autoptr (GHashTable) owned = given;
  g_autoptr (GError) error = NULL;
  const VbDriver *drv = vb_driver_lookup (driver);
  GHashTable *out;

  g_assert_nonnull (drv);
  out = vb_driver_resolve_attributes (drv, NULL, given, &error);
  g_assert_no_error (error);
  return out;
}

/* Device "d" of @driver with attributes @given (taken, may be NULL) and
 * the components @comps (source, role pairs), each with its own UUID. */
static VbDeviceConfig *
dev_new (const char *driver, GHashTable *given, const char *const *comps)
{
  g_autofree char *uuid = vb_uuid_new ();
  VbDeviceConfig *d = vb_device_config_new ("d", uuid, driver, "auto");

  g_hash_table_unref (d->attributes);
  d->attributes = resolved (driver, given);
  for (guint i = 0; comps && comps[i]; i += 2)
    {
      g_autofree char *cuuid = vb_uuid_new ();
      g_assert_nonnull (comps[i + 1]);
      g_ptr_array_add (d->components, vb_component_config_new (comps[i], comps[i + 1], cuuid));
    }
  g_ptr_array_add (d->exports, g_strdup ("nbd unix:/run/vblk-test.sock"));
  d->started = TRUE;
  return d;
}

static const VbComponentConfig *
component_of (const VbDeviceConfig *d, const char *source)
{
  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      if (strcmp (c->source, source) == 0)
        return c;
    }
  return NULL;
}

/* Plans @old with the request; takes @given. Checks that @old is
 * unchanged and that a NULL result comes with an error. */
static VbDeviceConfig *
plan (const VbDeviceConfig *old, const char *driver, GHashTable *given, const char *const *add,
      const char *const *remove, GError **error)
{
  g_autoptr (GHashTable) owned = given;
  g_autoptr (VbDeviceConfig) before = vb_device_config_copy (old);
  VbReconfigRequest request = {
    .driver = driver,
    .attributes = given,
    .add = add,
    .remove = remove,
  };
  VbDeviceConfig *nd;

  nd = vb_reconfig_plan (old, &request, error);
  g_assert_true (vb_device_config_equal (old, before));
  if (nd != NULL)
    g_assert_true (*error == NULL);
  return nd;
}

#define assert_mentions(message, word)                                                             \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if (strstr ((message), (word)) == NULL)                                                        \
      {                                                                                            \
        g_autofree char *m_                                                                        \
            = g_strdup_printf ("message '%s' does not mention '%s'", (message), (word));           \
        g_assertion_message (G_LOG_DOMAIN, __FILE__, __LINE__, G_STRFUNC, m_);                     \
      }                                                                                            \
  }                                                                                                \
  G_STMT_END

/* The plan must fail with VB_ERROR @code and a message naming each of
 * @words. Takes @given. */
static void
plan_fails (const VbDeviceConfig *old, const char *driver, GHashTable *given,
            const char *const *add, const char *const *remove, gint code, const char *const *words)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbDeviceConfig) nd = plan (old, driver, given, add, remove, &error);

  g_assert_null (nd);
  g_assert_error (error, VB_ERROR, code);
  for (guint i = 0; words && words[i]; i++)
    assert_mentions (error->message, words[i]);
}

/* A planned configuration must succeed. Takes @given. */
static VbDeviceConfig *
plan_ok (const VbDeviceConfig *old, const char *driver, GHashTable *given, const char *const *add,
         const char *const *remove)
{
  g_autoptr (GError) error = NULL;
  VbDeviceConfig *nd = plan (old, driver, given, add, remove, &error);

  g_assert_no_error (error);
  g_assert_nonnull (nd);
  return nd;
}

/* What every plan keeps: the name, UUID, backend, exports, flags. */
static void
assert_identity_kept (const VbDeviceConfig *nd, const VbDeviceConfig *old)
{
  g_assert_cmpstr (nd->name, ==, old->name);
  g_assert_cmpstr (nd->uuid, ==, old->uuid);
  g_assert_cmpstr (nd->backend, ==, old->backend);
  g_assert_cmpint (nd->autostart, ==, old->autostart);
  g_assert_cmpint (nd->started, ==, old->started);
  g_assert_cmpuint (nd->exports->len, ==, old->exports->len);
  for (guint i = 0; i < old->exports->len; i++)
    g_assert_cmpstr (nd->exports->pdata[i], ==, old->exports->pdata[i]);
}

/* @nd's attributes are exactly @driver's defaults overlaid with @expect
 * (taken). */
static void
assert_attributes (const VbDeviceConfig *nd, const char *driver, GHashTable *expect)
{
  g_autoptr (GHashTable) want = resolved (driver, expect);
  GHashTableIter iter;
  gpointer k, v;

  g_hash_table_iter_init (&iter, want);
  while (g_hash_table_iter_next (&iter, &k, &v))
    if (g_strcmp0 (g_hash_table_lookup (nd->attributes, k), v) != 0)
      {
        g_autofree char *m
            = g_strdup_printf ("attribute %s: '%s', expected '%s'", (char *) k,
                               (char *) g_hash_table_lookup (nd->attributes, k), (char *) v);
        g_assertion_message (G_LOG_DOMAIN, __FILE__, __LINE__, G_STRFUNC, m);
      }
  g_assert_cmpuint (g_hash_table_size (nd->attributes), ==, g_hash_table_size (want));
}

/* Component @i of @nd: @source in @role with @behind; a component @old
 * had keeps its UUID, a new one has a valid UUID that no other component
 * of @old or @nd has. */
static void
assert_component (const VbDeviceConfig *nd, const VbDeviceConfig *old, guint i, const char *source,
                  const char *role, gboolean behind)
{
  const VbComponentConfig *c, *was;

  g_assert_cmpuint (i, <, nd->components->len);
  c = nd->components->pdata[i];
  g_assert_cmpstr (c->source, ==, source);
  g_assert_cmpstr (c->role, ==, role);
  g_assert_cmpint (c->behind, ==, behind);
  was = component_of (old, source);
  if (was)
    {
      g_assert_cmpstr (c->uuid, ==, was->uuid);
      return;
    }
  g_assert_true (vb_uuid_is_valid (c->uuid));
  g_assert_cmpstr (c->uuid, !=, old->uuid);
  for (guint j = 0; j < old->components->len; j++)
    g_assert_cmpstr (c->uuid, !=, ((VbComponentConfig *) old->components->pdata[j])->uuid);
  for (guint j = 0; j < nd->components->len; j++)
    if (j != i)
      g_assert_cmpstr (c->uuid, !=, ((VbComponentConfig *) nd->components->pdata[j])->uuid);
}

/* ------------------------------------------------------------------ */

static void
test_file_to_raid1 (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("file", A ("engine", "true"), L ("/a", "0"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "raid1", NULL, L ("/b"), NULL);

  assert_identity_kept (nd, old);
  g_assert_cmpstr (nd->driver, ==, "raid1");
  /* the data is at byte 0 of /a: no superblock, no bitmap */
  assert_attributes (nd, "raid1", A ("metadata", "none", "bitmap", "none"));
  g_assert_false (vb_reconfig_has_metadata (nd));
  g_assert_cmpuint (nd->components->len, ==, 2);
  assert_component (nd, old, 0, "/a", "0", FALSE);
  assert_component (nd, old, 1, "/b", "1", TRUE);

  /* two legs at once, metadata=none and an online attribute given */
  g_autoptr (VbDeviceConfig) nd2 = plan_ok (
      old, "raid1", A ("metadata", "none", "sync_speed_max", "10M"), L ("/b", "/c"), NULL);
  assert_attributes (nd2, "raid1",
                     A ("metadata", "none", "bitmap", "none", "sync_speed_max", "10485760"));
  g_assert_cmpuint (nd2->components->len, ==, 3);
  assert_component (nd2, old, 0, "/a", "0", FALSE);
  assert_component (nd2, old, 1, "/b", "1", TRUE);
  assert_component (nd2, old, 2, "/c", "2", TRUE);
}

static void
test_file_to_raid1_metadata (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("file", NULL, L ("/a", "0"));

  plan_fails (old, "raid1", A ("metadata", "vblk"), L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "'/a'", "metadata=none"));
  plan_fails (old, "raid1", A ("bitmap", "internal"), L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "'/a'", "metadata=none"));
}

static void
test_file_to_raid1_no_add (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("file", NULL, L ("/a", "0"));

  plan_fails (old, "raid1", NULL, NULL, NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "file", "raid1", "--add"));
}

static void
test_window_to_raid1 (void)
{
  g_autoptr (VbDeviceConfig) at0
      = dev_new ("window", A ("offset", "0", "engine", "true"), L ("/a", "0"));
  g_autoptr (VbDeviceConfig) at1m = dev_new ("window", A ("offset", "1M"), L ("/a", "0"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (at0, "raid1", NULL, L ("/b"), NULL);

  assert_identity_kept (nd, at0);
  g_assert_cmpstr (nd->driver, ==, "raid1");
  assert_attributes (nd, "raid1", A ("metadata", "none", "bitmap", "none"));
  g_assert_cmpuint (nd->components->len, ==, 2);
  assert_component (nd, at0, 0, "/a", "0", FALSE);
  assert_component (nd, at0, 1, "/b", "1", TRUE);

  /* the data would have to move from 1 MiB to byte 0 */
  plan_fails (at1m, "raid1", NULL, L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "1048576", "move"));
  plan_fails (at1m, "linear", NULL, L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "1048576", "move"));
}

static void
test_file_to_linear (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("file", NULL, L ("/a", "0"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "linear", NULL, L ("/b"), NULL);

  assert_identity_kept (nd, old);
  g_assert_cmpstr (nd->driver, ==, "linear");
  /* the data stays at byte 0 of /a: no superblock, whatever a new
   * linear's default is */
  assert_attributes (nd, "linear", A ("metadata", "none"));
  g_assert_cmpuint (nd->components->len, ==, 2);
  assert_component (nd, old, 0, "/a", "0", FALSE);
  assert_component (nd, old, 1, "/b", "1", FALSE);

  plan_fails (old, "linear", NULL, NULL, NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "linear", "--add"));
  plan_fails (old, "linear", A ("metadata", "vblk"), L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "byte 0", "'/a'", "metadata=none"));
}

static void
test_raid1_add (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) none
      = dev_new ("raid1", A ("metadata", "none", "bitmap", "none"), L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, NULL, NULL, L ("/c"), NULL);
  g_autoptr (VbDeviceConfig) nd2 = NULL;

  assert_identity_kept (nd, old);
  g_assert_cmpstr (nd->driver, ==, "raid1");
  /* metadata=vblk: the superblocks say which leg is behind */
  assert_attributes (nd, "raid1", A ("metadata", "vblk", "bitmap", "internal"));
  g_assert_true (vb_reconfig_has_metadata (nd));
  g_assert_cmpuint (nd->components->len, ==, 3);
  assert_component (nd, old, 0, "/a", "0", FALSE);
  assert_component (nd, old, 1, "/b", "1", FALSE);
  assert_component (nd, old, 2, "/c", "2", FALSE);

  /* metadata=none: the desired state does; a leg already behind stays so */
  ((VbComponentConfig *) none->components->pdata[1])->behind = TRUE;
  nd2 = plan_ok (none, "raid1", NULL, L ("/c"), NULL);
  assert_attributes (nd2, "raid1", A ("metadata", "none", "bitmap", "none"));
  g_assert_cmpuint (nd2->components->len, ==, 3);
  assert_component (nd2, none, 0, "/a", "0", FALSE);
  assert_component (nd2, none, 1, "/b", "1", TRUE);
  assert_component (nd2, none, 2, "/c", "2", TRUE);
}

static void
test_raid1_remove (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1", "/c", "2"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "raid1", NULL, NULL, L ("/a"));
  g_autoptr (VbDeviceConfig) nd2 = plan_ok (old, NULL, NULL, NULL, L ("/b"));

  assert_identity_kept (nd, old);
  assert_attributes (nd, "raid1", NULL);
  g_assert_cmpuint (nd->components->len, ==, 2);
  /* renumbered from 0 */
  assert_component (nd, old, 0, "/b", "0", FALSE);
  assert_component (nd, old, 1, "/c", "1", FALSE);

  g_assert_cmpuint (nd2->components->len, ==, 2);
  assert_component (nd2, old, 0, "/a", "0", FALSE);
  assert_component (nd2, old, 1, "/c", "1", FALSE);
}

static void
test_raid1_add_remove (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "raid1", NULL, L ("/c"), L ("/a"));

  assert_identity_kept (nd, old);
  assert_attributes (nd, "raid1", NULL);
  g_assert_cmpuint (nd->components->len, ==, 2);
  assert_component (nd, old, 0, "/b", "0", FALSE);
  assert_component (nd, old, 1, "/c", "1", FALSE);
}

static void
test_raid1_bad_components (void)
{
  g_autoptr (VbDeviceConfig) old
      = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1", "/s", "spare", "/f", "faulty"));

  plan_fails (old, "raid1", NULL, NULL, L ("/a", "/b"), VB_ERROR_INVALID_ARGUMENT,
              L ("'d'", "every component"));
  plan_fails (old, "raid1", NULL, NULL, L ("/x"), VB_ERROR_INVALID_ARGUMENT, L ("'/x'", "'d'"));
  plan_fails (old, "raid1", NULL, NULL, L ("/s"), VB_ERROR_INVALID_ARGUMENT,
              L ("'/s'", "spare", "'d'"));
  plan_fails (old, "raid1", NULL, L ("/b"), NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'/b'", "already", "'d'"));
  plan_fails (old, "raid1", NULL, L ("/s"), NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'/s'", "already", "'d'"));
  plan_fails (old, "raid1", NULL, L ("/c", "/c"), NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'/c'", "twice"));
  plan_fails (old, "raid1", NULL, L ("c.img"), NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'c.img'", "absolute"));
  plan_fails (old, "raid1", NULL, L (""), NULL, VB_ERROR_INVALID_ARGUMENT, L ("empty"));
  plan_fails (old, "raid1", NULL, L ("/c"), L ("/c"), VB_ERROR_INVALID_ARGUMENT,
              L ("'/c'", "both added and removed"));
}

static void
test_raid1_max_legs (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new (
      "raid1", NULL,
      L ("/0", "0", "/1", "1", "/2", "2", "/3", "3", "/4", "4", "/5", "5", "/6", "6", "/7", "7"));

  plan_fails (old, "raid1", NULL, L ("/8"), NULL, VB_ERROR_INVALID_ARGUMENT, L ("raid1", "8", "9"));
}

static void
test_raid1_to_file_metadata (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));

  plan_fails (old, "file", NULL, NULL, L ("/b"), VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "metadata=vblk", "window", "1048576"));
}

static void
test_raid1_to_window (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "window", NULL, NULL, L ("/b"));
  g_autoptr (VbDeviceConfig) nd2 = plan_ok (old, "window", A ("offset", "1M"), NULL, L ("/a"));

  assert_identity_kept (nd, old);
  g_assert_cmpstr (nd->driver, ==, "window");
  assert_attributes (nd, "window", A ("offset", "1048576", "engine", "true"));
  g_assert_false (vb_reconfig_has_metadata (nd));
  g_assert_cmpuint (nd->components->len, ==, 1);
  assert_component (nd, old, 0, "/a", "0", FALSE);

  /* the same offset, written otherwise */
  assert_attributes (nd2, "window", A ("offset", "1048576", "engine", "true"));
  g_assert_cmpuint (nd2->components->len, ==, 1);
  assert_component (nd2, old, 0, "/b", "0", FALSE);
}

static void
test_raid1_to_window_other_offset (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));

  plan_fails (old, "window", A ("offset", "0"), NULL, L ("/b"), VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "1048576", "window at 0", "move"));
  plan_fails (old, "window", A ("offset", "2M"), NULL, L ("/b"), VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "1048576", "2097152", "move"));
}

static void
test_raid1_none_to_single (void)
{
  g_autoptr (VbDeviceConfig) old
      = dev_new ("raid1", A ("metadata", "none", "bitmap", "none"), L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "file", NULL, NULL, L ("/b"));
  g_autoptr (VbDeviceConfig) nd2 = plan_ok (old, "window", NULL, NULL, L ("/a"));

  assert_identity_kept (nd, old);
  g_assert_cmpstr (nd->driver, ==, "file");
  assert_attributes (nd, "file", A ("engine", "true"));
  g_assert_cmpuint (nd->components->len, ==, 1);
  assert_component (nd, old, 0, "/a", "0", FALSE);

  g_assert_cmpstr (nd2->driver, ==, "window");
  assert_attributes (nd2, "window", A ("offset", "0", "engine", "true"));
  g_assert_cmpuint (nd2->components->len, ==, 1);
  assert_component (nd2, old, 0, "/b", "0", FALSE);

  plan_fails (old, "window", A ("offset", "1M"), NULL, L ("/b"), VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "byte 0", "1048576", "move"));
}

static void
test_raid1_to_file_two_legs (void)
{
  g_autoptr (VbDeviceConfig) none
      = dev_new ("raid1", A ("metadata", "none", "bitmap", "none"), L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) three = dev_new ("raid1", A ("metadata", "none", "bitmap", "none"),
                                              L ("/a", "0", "/b", "1", "/c", "2"));

  plan_fails (none, "file", NULL, NULL, NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "raid1", "file", "--remove"));
  plan_fails (three, "window", NULL, NULL, L ("/c"), VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "raid1", "window", "--remove"));
}

static void
test_linear (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("linear", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "linear", NULL, L ("/c", "/d"), NULL);

  plan_fails (old, "linear", NULL, NULL, L ("/b"), VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "linear", "cut off"));
  plan_fails (old, NULL, NULL, L ("/c"), L ("/a"), VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "linear", "cut off"));

  assert_identity_kept (nd, old);
  g_assert_cmpstr (nd->driver, ==, "linear");
  /* a new linear has superblocks: the grown one keeps them */
  assert_attributes (nd, "linear", A ("metadata", "vblk"));
  g_assert_cmpuint (nd->components->len, ==, 4);
  assert_component (nd, old, 0, "/a", "0", FALSE);
  assert_component (nd, old, 1, "/b", "1", FALSE);
  assert_component (nd, old, 2, "/c", "2", FALSE);
  assert_component (nd, old, 3, "/d", "3", FALSE);

  {
    /* one saved before linear had superblocks (no attribute at all) stays
     * without: its data is at byte 0 */
    g_autoptr (VbDeviceConfig) saved = dev_new ("linear", NULL, L ("/a", "0", "/b", "1"));
    g_autoptr (VbDeviceConfig) grown = NULL;
    g_hash_table_remove_all (saved->attributes);
    grown = plan_ok (saved, "linear", NULL, L ("/c"), NULL);
    assert_attributes (grown, "linear", A ("metadata", "none"));
  }
}

static void
test_striped (void)
{
  g_autoptr (VbDeviceConfig) r0 = dev_new ("raid0", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) r10 = dev_new ("raid10", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) file = dev_new ("file", NULL, L ("/a", "0"));
  g_autoptr (VbDeviceConfig) lin = dev_new ("linear", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) r1 = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));

  plan_fails (r0, "raid10", NULL, NULL, NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "raid0", "raid10", "reshape"));
  plan_fails (r10, "raid10", NULL, L ("/c"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "raid10", "reshape"));
  plan_fails (r0, NULL, NULL, L ("/c"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "raid0", "reshape"));
  plan_fails (file, "raid0", NULL, L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "file", "raid0", "reshape"));
  plan_fails (r1, "raid10", NULL, L ("/c"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "raid1", "raid10", "reshape"));
  /* no reshape involved, but still no such conversion */
  plan_fails (lin, "raid1", NULL, NULL, NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "linear", "raid1", "no such conversion"));
  plan_fails (r1, "linear", NULL, NULL, NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'d'", "raid1", "linear", "no such conversion"));
}

static void
test_unknown_driver (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("file", NULL, L ("/a", "0"));

  plan_fails (old, "raid5", NULL, L ("/b"), NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'raid5'", "raid1"));
}

static void
test_nothing (void)
{
  g_autoptr (VbDeviceConfig) r1 = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) lin = dev_new ("linear", NULL, L ("/a", "0", "/b", "1"));

  plan_fails (r1, NULL, NULL, NULL, NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'d'", "nothing to reconfigure"));
  plan_fails (r1, "", NULL, NULL, NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'d'", "nothing to reconfigure"));
  plan_fails (r1, "raid1", A ("sync_speed_max", "1M"), NULL, NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'d'", "nothing to reconfigure", "SetAttributes"));
  plan_fails (lin, "linear", NULL, NULL, NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'d'", "nothing to reconfigure"));
}

/* file -> file (or window -> window) with nothing else changes nothing
 * either: documented as VB_ERROR_INVALID_ARGUMENT. */
static void
test_nothing_single (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("file", NULL, L ("/a", "0"));
  g_autoptr (GError) error = NULL;
  g_autoptr (VbDeviceConfig) nd = plan (old, NULL, NULL, NULL, NULL, &error);

  g_assert_null (nd);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  assert_mentions (error->message, "nothing to reconfigure");
}

static void
test_raid1_fixed_attribute (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));

  plan_fails (old, "raid1", A ("bitmap", "none"), L ("/c"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("'bitmap'", "raid1"));
  plan_fails (old, "raid1", A ("metadata", "none"), NULL, L ("/b"), VB_ERROR_NOT_SUPPORTED,
              L ("'metadata'", "raid1"));
  plan_fails (old, "raid1", A ("copies", "3"), L ("/c"), NULL, VB_ERROR_INVALID_ARGUMENT,
              L ("'copies'", "raid1"));
}

static void
test_raid1_online_attribute (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) nd
      = plan_ok (old, "raid1", A ("sync_speed_max", "100M", "bitmap", "internal"), L ("/c"), NULL);

  assert_identity_kept (nd, old);
  assert_attributes (nd, "raid1", A ("sync_speed_max", "104857600"));
  g_assert_cmpuint (nd->components->len, ==, 3);
  assert_component (nd, old, 0, "/a", "0", FALSE);
  assert_component (nd, old, 1, "/b", "1", FALSE);
  assert_component (nd, old, 2, "/c", "2", FALSE);
}

/* A fixed attribute given with its current value in another spelling
 * ("64M" for 67108864) changes nothing. */
static void
test_raid1_fixed_attribute_same_value (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1"));
  g_autoptr (GError) error = NULL;
  g_autoptr (VbDeviceConfig) nd = NULL;

  g_assert_cmpstr (g_hash_table_lookup (old->attributes, "bitmap_chunk"), ==, "67108864");
  nd = plan (old, "raid1", A ("bitmap_chunk", "64M"), L ("/c"), NULL, &error);
  g_assert_no_error (error);
  assert_attributes (nd, "raid1", NULL);
  g_assert_cmpuint (nd->components->len, ==, 3);
  assert_component (nd, old, 2, "/c", "2", FALSE);
}

static void
test_raid1_spares_kept (void)
{
  g_autoptr (VbDeviceConfig) old
      = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1", "/s", "spare", "/f", "faulty"));
  g_autoptr (VbDeviceConfig) nd = plan_ok (old, "raid1", NULL, L ("/c", "/e"), L ("/a"));
  g_autoptr (VbDeviceConfig) nd2 = plan_ok (old, "raid1", NULL, NULL, L ("/f"));

  assert_identity_kept (nd, old);
  g_assert_cmpuint (nd->components->len, ==, 5);
  assert_component (nd, old, 0, "/b", "0", FALSE);
  assert_component (nd, old, 1, "/c", "1", FALSE);
  assert_component (nd, old, 2, "/e", "2", FALSE);
  assert_component (nd, old, 3, "/s", "spare", FALSE);
  assert_component (nd, old, 4, "/f", "faulty", FALSE);

  /* a replaced (faulty) entry can go */
  g_assert_cmpuint (nd2->components->len, ==, 3);
  assert_component (nd2, old, 0, "/a", "0", FALSE);
  assert_component (nd2, old, 1, "/b", "1", FALSE);
  assert_component (nd2, old, 2, "/s", "spare", FALSE);
}

static void
test_raid1_to_window_spare (void)
{
  g_autoptr (VbDeviceConfig) old = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1", "/s", "spare"));
  g_autoptr (VbDeviceConfig) faulty
      = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1", "/f", "faulty"));
  g_autoptr (VbDeviceConfig) nd = NULL;

  plan_fails (old, "window", NULL, NULL, L ("/b"), VB_ERROR_INVALID_ARGUMENT,
              L ("'d'", "'/s'", "spare", "window"));
  plan_fails (faulty, "window", NULL, NULL, L ("/b"), VB_ERROR_INVALID_ARGUMENT,
              L ("'d'", "'/f'", "faulty", "window"));
  /* removing the faulty entry as well leaves one component */
  nd = plan_ok (faulty, "window", NULL, NULL, L ("/b", "/f"));
  g_assert_cmpuint (nd->components->len, ==, 1);
  assert_component (nd, faulty, 0, "/a", "0", FALSE);
}

/* Spares are not legs: raid1's limit of 8 copies counts slots only (as
 * vb-probe.c does). */
static void
test_raid1_many_spares (void)
{
  g_autoptr (VbDeviceConfig) old
      = dev_new ("raid1", NULL,
                 L ("/a", "0", "/b", "1", "/s1", "spare", "/s2", "spare", "/s3", "spare", "/s4",
                    "spare", "/s5", "spare", "/s6", "spare", "/s7", "spare"));
  g_autoptr (GError) error = NULL;
  g_autoptr (VbDeviceConfig) nd = plan (old, "raid1", NULL, L ("/c"), NULL, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (nd->components->len, ==, 10);
  assert_component (nd, old, 2, "/c", "2", FALSE);
  assert_component (nd, old, 3, "/s1", "spare", FALSE);
}

/* raid1 (metadata=none) -> file does not take "offset" (a window's). */
static void
test_raid1_to_file_offset (void)
{
  g_autoptr (VbDeviceConfig) old
      = dev_new ("raid1", A ("metadata", "none", "bitmap", "none"), L ("/a", "0", "/b", "1"));

  plan_fails (old, "file", A ("offset", "0"), NULL, L ("/b"), VB_ERROR_INVALID_ARGUMENT,
              L ("'offset'", "file"));
}

/* What a plain device would lose or take by becoming a mirror or a
 * concatenation is refused: read-only, or a window of part of its
 * component; a mirror's remains stay on the engine; a source removed
 * twice is an error as one added twice is. */
static void
test_single_refusals (void)
{
  g_autoptr (VbDeviceConfig) ro = dev_new ("file", A ("read_only", "true"), L ("/a", "0"));
  g_autoptr (VbDeviceConfig) part = dev_new ("window", A ("size", "10M"), L ("/a", "0"));
  g_autoptr (VbDeviceConfig) r1
      = dev_new ("raid1", A ("metadata", "none", "bitmap", "none"), L ("/a", "0", "/b", "1"));
  g_autoptr (VbDeviceConfig) r3 = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1", "/c", "2"));

  plan_fails (ro, "raid1", NULL, L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED, L ("'d'", "read-only"));
  plan_fails (ro, "linear", NULL, L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED, L ("read-only"));
  plan_fails (part, "raid1", NULL, L ("/b"), NULL, VB_ERROR_NOT_SUPPORTED,
              L ("window", "part of its component"));
  plan_fails (r1, "file", A ("engine", "false"), NULL, L ("/b"), VB_ERROR_NOT_SUPPORTED,
              L ("engine=false"));
  plan_fails (r3, "raid1", NULL, NULL, L ("/b", "/b"), VB_ERROR_INVALID_ARGUMENT,
              L ("'/b'", "removed twice"));
}

static void
test_describe (void)
{
  g_autoptr (VbDeviceConfig) r1 = dev_new ("raid1", NULL, L ("/a", "0", "/b", "1", "/s", "spare"));
  g_autoptr (VbDeviceConfig) none
      = dev_new ("raid1", A ("metadata", "none", "bitmap", "none"), L ("/a", "0"));
  g_autoptr (VbDeviceConfig) file = dev_new ("file", NULL, L ("/a.img", "0"));
  g_autoptr (VbDeviceConfig) window = dev_new ("window", A ("offset", "1M"), L ("/a", "0"));
  g_autoptr (VbDeviceConfig) empty = dev_new ("linear", NULL, NULL);
  g_autofree char *s1 = vb_reconfig_describe (r1);
  g_autofree char *s2 = vb_reconfig_describe (file);
  g_autofree char *s3 = vb_reconfig_describe (empty);

  g_assert_cmpstr (s1, ==, "raid1 of /a, /b");
  g_assert_cmpstr (s2, ==, "file of /a.img");
  g_assert_cmpstr (s3, ==, "linear");
  g_assert_true (vb_reconfig_has_metadata (r1));
  g_assert_false (vb_reconfig_has_metadata (none));
  g_assert_false (vb_reconfig_has_metadata (file));
  g_assert_false (vb_reconfig_has_metadata (window));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/reconfig/file-to-raid1", test_file_to_raid1);
  g_test_add_func ("/reconfig/file-to-raid1/metadata", test_file_to_raid1_metadata);
  g_test_add_func ("/reconfig/file-to-raid1/no-add", test_file_to_raid1_no_add);
  g_test_add_func ("/reconfig/window-to-raid1", test_window_to_raid1);
  g_test_add_func ("/reconfig/file-to-linear", test_file_to_linear);
  g_test_add_func ("/reconfig/raid1/add", test_raid1_add);
  g_test_add_func ("/reconfig/raid1/remove", test_raid1_remove);
  g_test_add_func ("/reconfig/raid1/add-remove", test_raid1_add_remove);
  g_test_add_func ("/reconfig/raid1/bad-components", test_raid1_bad_components);
  g_test_add_func ("/reconfig/raid1/max-legs", test_raid1_max_legs);
  g_test_add_func ("/reconfig/raid1/many-spares", test_raid1_many_spares);
  g_test_add_func ("/reconfig/raid1/fixed-attribute", test_raid1_fixed_attribute);
  g_test_add_func ("/reconfig/raid1/fixed-attribute-same-value",
                   test_raid1_fixed_attribute_same_value);
  g_test_add_func ("/reconfig/raid1/online-attribute", test_raid1_online_attribute);
  g_test_add_func ("/reconfig/raid1/spares-kept", test_raid1_spares_kept);
  g_test_add_func ("/reconfig/raid1-to-file/metadata", test_raid1_to_file_metadata);
  g_test_add_func ("/reconfig/raid1-to-file/two-legs", test_raid1_to_file_two_legs);
  g_test_add_func ("/reconfig/raid1-to-file/offset", test_raid1_to_file_offset);
  g_test_add_func ("/reconfig/raid1-to-file/single-refusals", test_single_refusals);
  g_test_add_func ("/reconfig/raid1-to-window", test_raid1_to_window);
  g_test_add_func ("/reconfig/raid1-to-window/other-offset", test_raid1_to_window_other_offset);
  g_test_add_func ("/reconfig/raid1-to-window/spare", test_raid1_to_window_spare);
  g_test_add_func ("/reconfig/raid1-none-to-single", test_raid1_none_to_single);
  g_test_add_func ("/reconfig/linear", test_linear);
  g_test_add_func ("/reconfig/striped", test_striped);
  g_test_add_func ("/reconfig/unknown-driver", test_unknown_driver);
  g_test_add_func ("/reconfig/nothing", test_nothing);
  g_test_add_func ("/reconfig/nothing/single", test_nothing_single);
  g_test_add_func ("/reconfig/describe", test_describe);
  return g_test_run ();
}
