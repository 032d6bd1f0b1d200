/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Scan: read the superblocks of a list of paths (worker thread),
 * group them by device UUID and decide, per group, whether it is known,
 * what is wrong with it and what adopting it would add (pure). */
#include "config.h"

#include "vb-scan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "driver.h"
#include "metadata.h"
#include "vb-error.h"
#include "vb-util.h"

#define SYS_CLASS_BLOCK "/sys/class/block"

static void
component_free (VbScanComponent *c)
{
  g_free (c->path);
  g_free (c->node_of);
  g_free (c);
}

static void
group_free (VbScanGroup *g)
{
  g_free (g->uuid);
  g_ptr_array_unref (g->components);
  g_ptr_array_unref (g->problems);
  g_free (g->known_name);
  g_clear_pointer (&g->config, vb_device_config_free);
  g_free (g);
}

VbScan *
vb_scan_new (void)
{
  VbScan *scan = g_new0 (VbScan, 1);

  scan->components = g_ptr_array_new_with_free_func ((GDestroyNotify) component_free);
  scan->path_problems = g_ptr_array_new_with_free_func (g_free);
  scan->seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  scan->groups = g_ptr_array_new_with_free_func ((GDestroyNotify) group_free);
  scan->looked = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return scan;
}

void
vb_scan_free (VbScan *scan)
{
  if (scan == NULL)
    return;
  g_ptr_array_unref (scan->components);
  g_ptr_array_unref (scan->path_problems);
  g_hash_table_unref (scan->seen);
  g_ptr_array_unref (scan->groups);
  g_hash_table_unref (scan->looked);
  g_free (scan->instance);
  g_free (scan);
}

void
vb_scan_add_node (VbScan *scan, const char *path, const VbSuperblock *sb, const char *node_of)
{
  VbScanComponent *c = g_new0 (VbScanComponent, 1);

  g_return_if_fail (scan != NULL && path != NULL && sb != NULL);
  c->path = g_strdup (path);
  c->sb = *sb;
  c->node_of = g_strdup (node_of);
  g_ptr_array_add (scan->components, c);
}

void
vb_scan_add (VbScan *scan, const char *path, const VbSuperblock *sb)
{
  vb_scan_add_node (scan, path, sb, NULL);
}

void
vb_scan_add_problem (VbScan *scan, const char *path, const char *message)
{
  g_return_if_fail (scan != NULL && path != NULL && message != NULL);
  g_ptr_array_add (scan->path_problems, g_strdup (path));
  g_ptr_array_add (scan->path_problems, g_strdup (message));
}

/* reading */

char **
vb_scan_default_paths (const char *const *extra)
{
  g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) dir = g_dir_open (SYS_CLASS_BLOCK, 0, NULL);
  const char *name;

  while (dir && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *size_file = g_build_filename (SYS_CLASS_BLOCK, name, "size", NULL);
      g_autofree char *text = NULL;
      char *node;

      if (!g_file_get_contents (size_file, &text, NULL, NULL)
          || g_ascii_strtoull (text, NULL, 10) == 0)
        continue;
      /* the kernel writes '/' in a device name as '!' (cciss!c0d0) */
      node = g_strconcat ("/dev/", name, NULL);
      g_strdelimit (node + 5, "!", '/');
      g_ptr_array_add (paths, node);
    }
  g_ptr_array_sort (paths, vb_compare_string_pointers);
  for (guint i = 0; extra && extra[i]; i++)
    g_ptr_array_add (paths, g_strdup (extra[i]));
  g_ptr_array_add (paths, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&paths), FALSE);
}

/* Reads @path's superblock through the first handler that recognizes it.
 * FALSE without @error: no superblock. */
static gboolean
read_one (int fd, const char *path, VbSuperblock *sb, GError **error)
{
  for (const VbMetadataHandler *const *h = vb_metadata_handlers (); *h; h++)
    if ((*h)->probe (fd, path))
      return (*h)->read (fd, path, sb, error);
  return FALSE;
}

void
vb_scan_read (VbScan *scan, const char *const *paths, gboolean explicit)
{
  g_return_if_fail (scan != NULL);

  for (guint i = 0; paths && paths[i]; i++)
    {
      const char *path = paths[i];
      g_autoptr (GError) error = NULL;
      g_autofree char *identity = NULL;
      g_auto (VbNodeOwner) owner = { 0 };
      gboolean node = FALSE;
      VbSuperblock sb;
      struct stat st;
      int fd;

      g_hash_table_add (scan->looked, g_strdup (path));
      if (stat (path, &st) != 0)
        {
          int errsv = errno;
          g_autofree char *message = NULL;

          if (!explicit && errsv == ENOENT)
            continue;
          message = g_strdup_printf ("'%s': %s", path, g_strerror (errsv));
          vb_scan_add_problem (scan, path, message);
          continue;
        }
      if (S_ISBLK (st.st_mode))
        identity = g_strdup_printf ("b%ju", (uintmax_t) st.st_rdev);
      else if (S_ISREG (st.st_mode))
        identity = g_strdup_printf ("f%ju:%ju", (uintmax_t) st.st_dev, (uintmax_t) st.st_ino);
      else
        {
          g_autofree char *message = NULL;

          if (!explicit)
            continue;
          message = g_strdup_printf ("'%s': not a regular file or block device", path);
          vb_scan_add_problem (scan, path, message);
          continue;
        }
      if (!g_hash_table_add (scan->seen, g_steal_pointer (&identity)))
        continue; /* the same component under another name */
      /* a node vblk made: a device's node of this vblkd holds the
       * components of the devices stacked on it; the loop device under a
       * kernel device shows its file (read as itself), and another vblkd's
       * devices are its own */
      if (S_ISBLK (st.st_mode) && vb_backends_node_owner (st.st_rdev, &owner))
        {
          if (owner.internal || g_strcmp0 (owner.instance, scan->instance) != 0)
            {
              g_autofree char *message = NULL;
              if (!explicit)
                continue;
              message = owner.internal
                            ? g_strdup_printf ("'%s': a node vblk uses inside device %s (scan its "
                                               "file instead)",
                                               path, owner.uuid)
                            : g_strdup_printf ("'%s': a block node of another vblkd (instance %s)",
                                               path, owner.instance);
              vb_scan_add_problem (scan, path, message);
              continue;
            }
          node = TRUE;
        }

      /* read-only: a block device opened for writing sends a change
       * uevent when closed */
      fd = open (path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        {
          int errsv = errno;
          g_autofree char *message = g_strdup_printf ("'%s': %s", path, g_strerror (errsv));

          vb_scan_add_problem (scan, path, message);
          continue;
        }
      if (read_one (fd, path, &sb, &error))
        vb_scan_add_node (scan, path, &sb, node ? owner.uuid : NULL);
      else if (error && !g_error_matches (error, VB_ERROR, VB_ERROR_NOT_FOUND))
        vb_scan_add_problem (scan, path, error->message);
      close (fd);
    }
}

/* grouping */

static gint
compare_components (gconstpointer a, gconstpointer b)
{
  const VbScanComponent *x = *(VbScanComponent *const *) a;
  const VbScanComponent *y = *(VbScanComponent *const *) b;
  /* slots by number, then spares */
  guint64 rx = (guint32) x->sb.role, ry = (guint32) y->sb.role;

  if (rx != ry)
    return rx < ry ? -1 : 1;
  return strcmp (x->path, y->path);
}

static gint
compare_groups (gconstpointer a, gconstpointer b)
{
  const VbScanGroup *x = *(VbScanGroup *const *) a;
  const VbScanGroup *y = *(VbScanGroup *const *) b;
  int c = strcmp (x->best->device_name, y->best->device_name);

  return c != 0 ? c : strcmp (x->uuid, y->uuid);
}

static void G_GNUC_PRINTF (2, 3) problem (VbScanGroup *g, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_ptr_array_add (g->problems, g_strdup_vprintf (format, args));
  va_end (args);
}

static VbScanComponent *
find_component (VbScanGroup *g, const char *component_uuid)
{
  for (guint i = 0; i < g->components->len; i++)
    {
      VbScanComponent *c = g->components->pdata[i];
      if (strcmp (c->sb.component_uuid, component_uuid) == 0)
        return c;
    }
  return NULL;
}

/* Conflicts between the superblocks of one group. */
static void
check_conflicts (VbScanGroup *g)
{
  g_autoptr (GHashTable) told = g_hash_table_new (g_direct_hash, g_direct_equal);

  for (guint i = 0; i < g->components->len; i++)
    for (guint j = i + 1; j < g->components->len; j++)
      {
        VbScanComponent *a = g->components->pdata[i];
        VbScanComponent *b = g->components->pdata[j];

        if (strcmp (a->sb.component_uuid, b->sb.component_uuid) == 0)
          problem (g, "component %s is at two paths: '%s' and '%s'", a->sb.component_uuid, a->path,
                   b->path);
        else if (a->sb.role >= 0 && a->sb.role == b->sb.role && a->sb.events == b->sb.events
                 && g_hash_table_add (told, GINT_TO_POINTER (a->sb.role + 1)))
          /* which of them holds the data cannot be told */
          problem (g, "two components claim role %d at events %" G_GUINT64_FORMAT ": '%s' and '%s'",
                   a->sb.role, a->sb.events, a->path, b->path);
      }
}

/* "key=value\n" lines -> char* -> char*, or NULL with a problem. */
static GHashTable *
parse_attributes (VbScanGroup *g)
{
  g_autoptr (GHashTable) given = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_auto (GStrv) lines = g_strsplit (g->best->attributes, "\n", -1);

  for (guint i = 0; lines[i]; i++)
    {
      const char *eq = strchr (lines[i], '=');

      if (*lines[i] == '\0')
        continue;
      if (eq == NULL || eq == lines[i])
        {
          problem (g, "attributes: '%s' is not KEY=VALUE", lines[i]);
          return NULL;
        }
      g_hash_table_insert (given, g_strndup (lines[i], eq - lines[i]), g_strdup (eq + 1));
    }
  return g_steal_pointer (&given);
}

/* How an adopted device names component @c: its path, or vblk:NAME when
 * the path is the block node of device NAME of this vblkd (a stack's
 * upper level: built on the device, never on its raw node). NULL with a
 * problem when @desired has no such device. */
static char *
source_of (const VbScan *scan, VbScanGroup *g, const VbScanComponent *c, const VbState *desired)
{
  const VbNodeOwner owner = { .instance = scan->instance, .uuid = c->node_of };

  if (c->node_of == NULL)
    return g_strdup (c->path);
  for (guint i = 0; i < desired->devices->len; i++)
    {
      const VbDeviceConfig *d = desired->devices->pdata[i];
      if (vb_node_owner_is (&owner, scan->instance, d->uuid))
        return g_strdup_printf ("vblk:%s", d->name);
    }
  problem (g, "component '%s' is the block node of a device vblkd does not know (%s)", c->path,
           c->node_of);
  return NULL;
}

/* The device, without components: the superblock's name and attributes
 * (checked), or NULL with a problem recorded. */
static VbDeviceConfig *
new_config (VbScanGroup *g, const VbDriver *driver, const char *backend)
{
  const VbSuperblock *best = g->best;
  g_autoptr (GHashTable) given = parse_attributes (g);
  g_autoptr (GError) error = NULL;
  GHashTable *resolved;
  VbDeviceConfig *d;

  if (given == NULL)
    return NULL;
  resolved = vb_driver_resolve_attributes (driver, NULL, given, &error);
  if (resolved == NULL || !vb_check_redundancy (resolved, &error))
    {
      problem (g, "%s", error->message);
      g_clear_pointer (&resolved, g_hash_table_unref);
      return NULL;
    }
  if (best->n_roles < driver->min_components || best->n_roles > driver->max_components)
    problem (g, "driver '%s' takes %u to %u components, the superblock has %u slots", driver->name,
             driver->min_components, driver->max_components, best->n_roles);
  d = vb_device_config_new (best->device_name, g->uuid, driver->name, backend);
  g_hash_table_unref (d->attributes);
  d->attributes = resolved;
  return d;
}

/* An mdadm array: each member's superblock names only its own role, so
 * the slots come from the members (the newest holder of each); md runs it
 * with its own superblocks (metadata=md1, backend kernel). */
static VbDeviceConfig *
build_md1_config (const VbScan *scan, VbScanGroup *g, const VbDriver *driver,
                  const VbState *desired)
{
  const VbSuperblock *best = g->best;
  g_autoptr (VbDeviceConfig) d = NULL;
  guint slots_found = 0;

  if (driver == NULL
      || (strcmp (driver->name, "raid1") != 0 && strcmp (driver->name, "raid10") != 0))
    {
      problem (g, "an mdadm %s array: vblk adopts mdadm's raid1 and raid10 arrays", best->driver);
      return NULL;
    }
  if (strstr (best->attributes, "md_layout="))
    {
      problem (g, "an mdadm raid10 with a far or offset layout: vblk adopts the near layout only");
      return NULL;
    }
  d = new_config (g, driver, "kernel");
  if (d == NULL)
    return NULL;
  for (guint r = 0; r < best->n_roles; r++)
    {
      VbScanComponent *holder = NULL;
      g_autofree char *role = g_strdup_printf ("%u", r);
      for (guint i = 0; i < g->components->len; i++)
        {
          VbScanComponent *c = g->components->pdata[i];
          if (c->sb.role == (gint32) r && (holder == NULL || c->sb.events > holder->sb.events))
            holder = c;
        }
      g_autofree char *source = NULL;
      if (holder == NULL)
        {
          problem (g, "slot %u: no member of the array found", r);
          continue;
        }
      if ((source = source_of (scan, g, holder, desired)) == NULL)
        continue;
      g_ptr_array_add (d->components,
                       vb_component_config_new (source, role, holder->sb.component_uuid));
      slots_found++;
    }
  for (guint i = 0; i < g->components->len; i++)
    {
      VbScanComponent *c = g->components->pdata[i];
      g_autofree char *source = NULL;
      if (c->sb.role == VB_SB_ROLE_SPARE && (source = source_of (scan, g, c, desired)))
        g_ptr_array_add (d->components,
                         vb_component_config_new (source, "spare", c->sb.component_uuid));
    }
  if (slots_found < best->n_roles || g->problems->len > 0)
    return NULL;
  return g_steal_pointer (&d);
}

/* The device adoption would add, or NULL with problems recorded. */
static VbDeviceConfig *
build_config (const VbScan *scan, VbScanGroup *g, const VbState *desired)
{
  const VbSuperblock *best = g->best;
  const VbDriver *driver = vb_driver_lookup (best->driver);
  g_autoptr (VbDeviceConfig) d = NULL;
  guint slots_found = 0;

  if (strcmp (best->format, "md1") == 0)
    return build_md1_config (scan, g, driver, desired);
  if (driver == NULL)
    {
      problem (g, "driver '%s': unknown", best->driver);
      return NULL;
    }
  d = new_config (g, driver, "auto");
  if (d == NULL)
    return NULL;
  for (guint i = 0; i < best->n_roles; i++)
    {
      const char *want = best->roles[i].uuid;
      VbScanComponent *c = *want ? find_component (g, want) : NULL;
      g_autofree char *role = g_strdup_printf ("%u", i);
      g_autofree char *source = NULL;

      if (c == NULL)
        {
          problem (g, "slot %u (%s): no component found", i, *want ? want : "none recorded");
          continue;
        }
      if ((source = source_of (scan, g, c, desired)) == NULL)
        continue;
      g_ptr_array_add (d->components, vb_component_config_new (source, role, want));
      slots_found++;
    }
  for (guint i = 0; i < g->components->len; i++)
    {
      VbScanComponent *c = g->components->pdata[i];
      g_autofree char *source = NULL;
      gboolean holds_slot = FALSE;

      if (c->sb.role != VB_SB_ROLE_SPARE)
        continue;
      for (guint r = 0; r < best->n_roles; r++)
        holds_slot |= strcmp (best->roles[r].uuid, c->sb.component_uuid) == 0;
      if (!holds_slot && (source = source_of (scan, g, c, desired)))
        g_ptr_array_add (d->components,
                         vb_component_config_new (source, "spare", c->sb.component_uuid));
    }
  if (slots_found < best->n_roles || g->problems->len > 0)
    return NULL;
  return g_steal_pointer (&d);
}

/* Another device of @desired or of the scan already has the group's name. */
static void
check_name (VbScan *scan, VbScanGroup *g, const VbState *desired)
{
  const char *name = g->best->device_name;
  g_autoptr (GError) error = NULL;

  if (!vb_name_is_valid (name, "name", &error))
    {
      problem (g, "%s", error->message);
      return;
    }
  if (vb_state_lookup (desired, name) != NULL)
    problem (g, "name '%s' is taken by another device", name);
  for (guint i = 0; i < scan->groups->len; i++)
    {
      VbScanGroup *o = scan->groups->pdata[i];

      if (o != g && o->known_name == NULL && strcmp (o->best->device_name, name) == 0)
        problem (g, "name '%s' is also the name of device %s, found in this scan", name, o->uuid);
    }
}

/* What a start makes of @c: the assembly rule (assembly.h) against the
 * newest superblock, the one the engine and md apply. A spare is current
 * unless older; an mdadm member follows md's own rule (older: recovered). */
/* A device with one copy of its data (raid0, linear): no component is
 * brought up to date, so one that is not current refuses the start
 * (assembly-single.c: one event behind is a cut-short superblock update). */
static gboolean
single_copy (const VbScanGroup *g)
{
  const VbDriver *driver = vb_driver_lookup (g->best->driver);

  return driver != NULL && !driver->redundant && strcmp (g->best->format, "md1") != 0;
}

static VbSlotDecision
component_decision (const VbScanGroup *g, const VbScanComponent *c)
{
  VbSlotFacts facts = {
    .device = g->best,
    .slot = (guint) c->sb.role,
    .present = TRUE,
    .own = &c->sb,
    .newest = g->best->component_uuid,
    .use_bitmap = TRUE,
    .can_resume = TRUE,
  };

  if (strcmp (g->best->format, "md1") == 0 || c->sb.role < 0
      || (guint32) c->sb.role >= g->best->n_roles)
    return c->sb.events < g->best->events ? VB_SLOT_REBUILD : VB_SLOT_CURRENT;
  if (single_copy (g))
    return c->sb.events + 1 >= g->best->events
                   && g->best->roles[c->sb.role].state == VB_ROLE_IN_SYNC
                   && strcmp (g->best->roles[c->sb.role].uuid, c->sb.component_uuid) == 0
               ? VB_SLOT_CURRENT
               : VB_SLOT_REBUILD; /* shown as "refuse" */
  return vb_assembly_decide (&facts, NULL);
}

void
vb_scan_group (VbScan *scan, const VbState *desired)
{
  g_autoptr (GHashTable) by_uuid = g_hash_table_new (g_str_hash, g_str_equal);

  g_return_if_fail (scan != NULL && desired != NULL);

  g_ptr_array_set_size (scan->groups, 0);
  for (guint i = 0; i < scan->components->len; i++)
    {
      VbScanComponent *c = scan->components->pdata[i];
      VbScanGroup *g = g_hash_table_lookup (by_uuid, c->sb.device_uuid);

      if (g == NULL)
        {
          g = g_new0 (VbScanGroup, 1);
          g->uuid = g_strdup (c->sb.device_uuid);
          g->components = g_ptr_array_new ();
          g->problems = g_ptr_array_new_with_free_func (g_free);
          g_hash_table_insert (by_uuid, g->uuid, g);
          g_ptr_array_add (scan->groups, g);
        }
      g_ptr_array_add (g->components, c);
      if (g->best == NULL || c->sb.events > g->best->events)
        g->best = &c->sb;
    }

  for (guint i = 0; i < scan->groups->len; i++)
    {
      VbScanGroup *g = scan->groups->pdata[i];

      g_ptr_array_sort (g->components, compare_components);
      for (guint j = 0; j < g->components->len; j++)
        {
          VbScanComponent *c = g->components->pdata[j];
          c->decision = component_decision (g, c);
          c->stale = c->decision != VB_SLOT_CURRENT;
        }
      for (guint j = 0; j < desired->devices->len; j++)
        {
          const VbDeviceConfig *d = desired->devices->pdata[j];
          if (strcmp (d->uuid, g->uuid) == 0)
            g->known_name = g_strdup (d->name);
        }
    }
  for (guint i = 0; i < scan->groups->len; i++)
    {
      VbScanGroup *g = scan->groups->pdata[i];
      g_autoptr (VbDeviceConfig) config = NULL;

      check_conflicts (g);
      if (g->known_name == NULL)
        check_name (scan, g, desired);
      /* known: what is missing is still worth showing */
      config = build_config (scan, g, desired);
      if (g->known_name == NULL && g->problems->len == 0)
        g->config = g_steal_pointer (&config);
    }
  g_ptr_array_sort (scan->groups, compare_groups);
}

/* results */

static GVariant *
components_variant (const VbScanGroup *g)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < g->components->len; i++)
    {
      const VbScanComponent *c = g->components->pdata[i];

      g_variant_builder_open (&b, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&b, "{sv}", "path", g_variant_new_string (c->path));
      g_variant_builder_add (&b, "{sv}", "uuid", g_variant_new_string (c->sb.component_uuid));
      g_variant_builder_add (&b, "{sv}", "role", g_variant_new_int32 (c->sb.role));
      g_variant_builder_add (&b, "{sv}", "events", g_variant_new_uint64 (c->sb.events));
      g_variant_builder_add (&b, "{sv}", "stale", g_variant_new_boolean (c->stale));
      g_variant_builder_add (&b, "{sv}", "start",
                             g_variant_new_string (single_copy (g) && c->stale
                                                       ? "refuse"
                                                       : vb_slot_decision_to_string (c->decision)));
      g_variant_builder_close (&b);
    }
  return g_variant_builder_end (&b);
}

static const char *
group_device_name (const VbScanGroup *g)
{
  if (g->known_name)
    return g->known_name;
  if (g->adopted && g->config)
    return g->config->name;
  return NULL;
}

GVariant *
vb_scan_found_variant (const VbScan *scan)
{
  GVariantBuilder b;

  g_return_val_if_fail (scan != NULL, NULL);

  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < scan->groups->len; i++)
    {
      const VbScanGroup *g = scan->groups->pdata[i];
      const char *device = group_device_name (g);

      g_variant_builder_open (&b, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&b, "{sv}", "uuid", g_variant_new_string (g->uuid));
      g_variant_builder_add (&b, "{sv}", "name", g_variant_new_string (g->best->device_name));
      g_variant_builder_add (&b, "{sv}", "driver", g_variant_new_string (g->best->driver));
      g_variant_builder_add (&b, "{sv}", "events", g_variant_new_uint64 (g->best->events));
      g_variant_builder_add (&b, "{sv}", "slots", g_variant_new_uint32 (g->best->n_roles));
      /* adopted by an earlier level of this scan: in the state now, but
       * not known before it */
      g_variant_builder_add (&b, "{sv}", "known",
                             g_variant_new_boolean (g->known_name != NULL && !g->adopted));
      g_variant_builder_add (&b, "{sv}", "adopted", g_variant_new_boolean (g->adopted));
      if (device)
        {
          g_autofree char *path = vb_device_object_path (device);
          g_variant_builder_add (&b, "{sv}", "device", g_variant_new_object_path (path));
        }
      g_variant_builder_add (&b, "{sv}", "components", components_variant (g));
      g_variant_builder_add (
          &b, "{sv}", "problems",
          g_variant_new_strv ((const char *const *) g->problems->pdata, g->problems->len));
      if (g->note)
        g_variant_builder_add (&b, "{sv}", "note", g_variant_new_string (g->note));
      g_variant_builder_close (&b);
    }
  for (guint i = 0; i + 1 < scan->path_problems->len; i += 2)
    {
      const char *message = scan->path_problems->pdata[i + 1];

      g_variant_builder_open (&b, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&b, "{sv}", "path",
                             g_variant_new_string (scan->path_problems->pdata[i]));
      g_variant_builder_add (&b, "{sv}", "problems", g_variant_new_strv (&message, 1));
      g_variant_builder_close (&b);
    }
  return g_variant_builder_end (&b);
}

char **
vb_scan_device_paths (const VbScan *scan)
{
  GPtrArray *paths = g_ptr_array_new ();

  g_return_val_if_fail (scan != NULL, NULL);

  for (guint i = 0; i < scan->groups->len; i++)
    {
      const char *device = group_device_name (scan->groups->pdata[i]);
      if (device)
        g_ptr_array_add (paths, vb_device_object_path (device));
    }
  g_ptr_array_add (paths, NULL);
  return (char **) g_ptr_array_free (paths, FALSE);
}

char **
vb_scan_next_nodes (const VbScan *scan, GHashTable *block_devices)
{
  GPtrArray *nodes = g_ptr_array_new ();

  g_return_val_if_fail (scan != NULL && block_devices != NULL, NULL);

  for (guint i = 0; i < scan->groups->len; i++)
    {
      const char *device = group_device_name (scan->groups->pdata[i]);
      const char *node = device ? g_hash_table_lookup (block_devices, device) : NULL;
      gboolean again = FALSE;

      if (node == NULL || g_hash_table_contains (scan->looked, node))
        continue;
      for (guint j = 0; j < nodes->len; j++)
        again |= strcmp (nodes->pdata[j], node) == 0;
      if (!again)
        g_ptr_array_add (nodes, g_strdup (node));
    }
  g_ptr_array_add (nodes, NULL);
  return (char **) g_ptr_array_free (nodes, FALSE);
}
