/* Component probing and the checks that need the real files and block
 * devices: existence, size, sharing, mounts (libmount). */
#include "config.h"

#include "vb-probe.h"

#include "metadata.h"

#include "vb-error.h"
#include "vb-util.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PROBE_MAX_DEPTH 32

static gboolean block_size_of (const char *path, guint64 *size, GError **error);

gboolean
vb_probe_source_missing (const char *source)
{
  struct stat st;
  guint64 size = 0;

  if (source[0] != '/')
    return FALSE;
  if (stat (source, &st) < 0)
    return TRUE;
  return S_ISBLK (st.st_mode) && block_size_of (source, &size, NULL) && size == 0;
}

void
vb_probe_init (VbProbe *probe, const VbState *state, GHashTable *block_devices)
{
  *probe = (VbProbe){ 0 };
  probe->state = state;
  probe->block_devices = block_devices;
  probe->sizes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  probe->depth = 0;
}

void
vb_probe_clear (VbProbe *probe)
{
  g_clear_pointer (&probe->sizes, g_hash_table_unref);
}

static gboolean
block_size_of (const char *path, guint64 *size, GError **error)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  int e;

  if (fd < 0)
    goto fail;
  if (ioctl (fd, BLKGETSIZE64, size) < 0)
    {
      e = errno;
      close (fd);
      errno = e;
      goto fail;
    }
  close (fd);
  return TRUE;
fail:
  e = errno;
  g_set_error (error, VB_ERROR, e == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
               "component '%s': %s", path, g_strerror (e));
  return FALSE;
}

static gboolean device_size (VbProbe *probe, const char *name, guint64 *size, GError **error);

static gboolean
probe_one (VbProbe *probe, const char *source, char **path, VbComponentInfo *info, GError **error)
{
  g_autofree char *dep = NULL;
  VbSourceKind kind;
  struct stat st;

  if (!vb_source_parse (source, &kind, &dep, error))
    return FALSE;
  info->source = source;
  switch (kind)
    {
    case VB_SOURCE_NBD:
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   "component '%s': NBD components need the engine, which this version lacks",
                   source);
      return FALSE;

    case VB_SOURCE_DEVICE:
      info->kind = VB_COMPONENT_KIND_DEVICE;
      *path = g_strdup (probe->block_devices ? g_hash_table_lookup (probe->block_devices, dep)
                                             : NULL);
      return device_size (probe, dep, &info->size, error);

    case VB_SOURCE_PATH:
      if (stat (source, &st) < 0)
        {
          int e = errno;
          g_set_error (error, VB_ERROR, e == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                       "component '%s': %s", source, g_strerror (e));
          return FALSE;
        }
      *path = g_strdup (source);
      if (S_ISREG (st.st_mode))
        {
          info->kind = VB_COMPONENT_KIND_FILE;
          info->size = st.st_size;
          return TRUE;
        }
      if (S_ISBLK (st.st_mode))
        {
          info->kind = VB_COMPONENT_KIND_BLOCK;
          if (!block_size_of (source, &info->size, error))
            return FALSE;
          /* a loop device with nothing attached, an empty card reader */
          if (info->size == 0)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                           "component '%s': the block device has no medium (size 0)", source);
              return FALSE;
            }
          return TRUE;
        }
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   "component '%s': neither a regular file nor a block device", source);
      return FALSE;
    }
  g_assert_not_reached ();
}

gboolean
vb_probe_components (VbProbe *probe, const VbDeviceConfig *config, GPtrArray **paths,
                     GArray **infos, GError **error)
{
  g_autoptr (GPtrArray) p = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) in = g_array_new (FALSE, TRUE, sizeof (VbComponentInfo));
  guint64 data_offset = vb_driver_data_offset (config->attributes);
  g_autoptr (GError) local = NULL;
  guint n_missing = 0;
  guint64 smallest = G_MAXUINT64;

  /* only the slots: spares wait outside the layout */
  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      VbComponentInfo info = { 0 };
      char *path = NULL;

      if (!vb_component_config_is_slot (c))
        continue;
      if (!probe_one (probe, c->source, &path, &info, &local))
        {
          /* a redundant device with metadata starts without a file or disk
           * that is gone; its superblocks record the slot missing */
          if (!vb_driver_has_metadata (config->attributes) || c->source[0] != '/'
              || probe->no_missing || !g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
            {
              g_propagate_error (error, g_steal_pointer (&local));
              return FALSE;
            }
          g_clear_error (&local);
          info.source = c->source;
          info.kind = VB_COMPONENT_KIND_FILE;
          info.missing = TRUE;
          info.size = 0;
          g_ptr_array_add (p, NULL);
          g_array_append_val (in, info);
          n_missing++;
          continue;
        }
      if (data_offset && info.size < data_offset + 4096)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       "component '%s': %" G_GUINT64_FORMAT
                       " bytes, too small for its metadata (data starts at %" G_GUINT64_FORMAT ")",
                       c->source, info.size, data_offset);
          g_free (path);
          return FALSE;
        }
      /* the driver sees the data area only: an mdadm array's used size
       * (md1), or what follows the data offset */
      info.size -= data_offset;
      if (g_hash_table_contains (config->attributes, "data_size")
          && vb_attr_get_u64 (config->attributes, "data_size") > 0)
        info.size = MIN (info.size, vb_attr_get_u64 (config->attributes, "data_size"));
      g_ptr_array_add (p, path);
      g_array_append_val (in, info);
    }
  if (n_missing > 0)
    {
      for (guint i = 0; i < in->len; i++)
        if (!g_array_index (in, VbComponentInfo, i).missing)
          smallest = MIN (smallest, g_array_index (in, VbComponentInfo, i).size);
      if (smallest == G_MAXUINT64)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                       "device '%s': none of its components is there", config->name);
          return FALSE;
        }
      for (guint i = 0; i < in->len; i++)
        if (g_array_index (in, VbComponentInfo, i).missing)
          g_array_index (in, VbComponentInfo, i).size = smallest;
    }
  *paths = g_steal_pointer (&p);
  *infos = g_steal_pointer (&in);
  return TRUE;
}

gboolean
vb_probe_check_foreign (VbProbe *probe, const VbDeviceConfig *config, GError **error)
{
  const char *metadata = g_hash_table_lookup (config->attributes, "metadata");
  const VbMetadataHandler *handler = metadata ? vb_metadata_lookup (metadata) : NULL;

  if (handler == NULL)
    return TRUE;
  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      VbSuperblock sb;

      if (c->source[0] != '/' || !handler->probe (-1, c->source)
          || !handler->read (-1, c->source, &sb, NULL))
        continue;
      /* a spare holds no data: one may move to another device */
      if (strcmp (sb.device_uuid, config->uuid) != 0 && sb.role != VB_SB_ROLE_SPARE)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_BUSY,
              "component '%s' carries the %s superblock of device '%s' (%s), events %" G_GUINT64_FORMAT
              "; adopt that device (vbmgr scan --adopt) or wipe its "
              "metadata first",
              c->source, handler->name, sb.device_name, sb.device_uuid, sb.events);
          return FALSE;
        }
    }
  return TRUE;
}

gboolean
vb_probe_spares (VbProbe *probe, const VbDeviceConfig *config, GPtrArray **paths, GPtrArray **uuids,
                 GError **error)
{
  g_autoptr (GPtrArray) p = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) u = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) local = NULL;

  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      VbComponentInfo info = { 0 };
      char *path = NULL;

      if (g_strcmp0 (c->role, "spare") != 0)
        continue;
      if (!probe_one (probe, c->source, &path, &info, &local))
        {
          /* a spare that is not there is no spare now */
          if (g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
            {
              g_clear_error (&local);
              continue;
            }
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      if (path == NULL)
        continue; /* a device not started: not a spare now */
      g_ptr_array_add (p, path);
      g_ptr_array_add (u, g_strdup (c->uuid));
    }
  *paths = g_steal_pointer (&p);
  *uuids = g_steal_pointer (&u);
  return TRUE;
}

gboolean
vb_probe_validate (VbProbe *probe, const VbDeviceConfig *config, gboolean need_complete,
                   guint64 *size, gboolean *complete, GError **error)
{
  const VbDriver *driver = vb_driver_lookup (config->driver);
  g_autoptr (GPtrArray) paths = NULL;
  g_autoptr (GArray) infos = NULL;
  g_autoptr (GHashTable) attributes = NULL;
  guint n = vb_device_config_n_slots (config);

  if (driver == NULL)
    {
      g_autofree char *known = vb_drivers_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "driver '%s': unknown (known: %s)",
                   config->driver, known);
      return FALSE;
    }
  attributes = vb_driver_resolve_attributes (driver, NULL, config->attributes, error);
  if (attributes == NULL)
    return FALSE;
  if (!vb_probe_components (probe, config, &paths, &infos, error))
    return FALSE;

  *complete = n >= driver->min_components;
  *size = 0;
  if (!*complete && !need_complete && n <= driver->max_components)
    return TRUE; /* configuring: checked in full once complete */
  if (!vb_driver_validate (driver, attributes, (VbComponentInfo *) infos->data, n, error))
    return FALSE;
  *size = driver->size (attributes, (VbComponentInfo *) infos->data, n);
  return TRUE;
}

static gboolean
device_size (VbProbe *probe, const char *name, guint64 *size, GError **error)
{
  const VbDeviceConfig *config = vb_state_lookup (probe->state, name);
  guint64 *memo = g_hash_table_lookup (probe->sizes, name);
  gboolean complete;
  g_autoptr (GError) local = NULL;

  if (memo)
    {
      *size = *memo;
      return TRUE;
    }
  if (config == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, "component 'vblk:%s': no device named '%s'",
                   name, name);
      return FALSE;
    }
  if (probe->depth >= PROBE_MAX_DEPTH)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_DEPENDENCY_CYCLE,
                   "component 'vblk:%s': devices nested deeper than %d", name, PROBE_MAX_DEPTH);
      return FALSE;
    }
  probe->depth++;
  gboolean ok = vb_probe_validate (probe, config, TRUE, size, &complete, &local);
  probe->depth--;
  if (!ok)
    {
      g_set_error (error, local->domain, local->code, "component 'vblk:%s': %s", name,
                   local->message);
      return FALSE;
    }
  g_hash_table_insert (probe->sizes, g_strdup (name), g_memdup2 (size, sizeof *size));
  return TRUE;
}

/* An identity that sees through symlinks and aliases: "f:DEV:INO" for a
 * file, "b:MAJ:MIN" for a block device, "d:NAME" for a vblk device. */
static char *
identity_of (const char *source)
{
  struct stat st;

  if (g_str_has_prefix (source, "vblk:"))
    return g_strdup_printf ("d:%s", source + 5);
  if (stat (source, &st) < 0)
    return g_strdup_printf ("p:%s", source);
  if (S_ISBLK (st.st_mode))
    return g_strdup_printf ("b:%u:%u", major (st.st_rdev), minor (st.st_rdev));
  return g_strdup_printf ("f:%lu:%lu", (gulong) st.st_dev, (gulong) st.st_ino);
}

static gboolean
window_range (const VbDeviceConfig *config, guint64 *start, guint64 *end)
{
  const char *offset, *size;

  if (strcmp (config->driver, "window") != 0)
    return FALSE;
  offset = g_hash_table_lookup (config->attributes, "offset");
  size = g_hash_table_lookup (config->attributes, "size");
  *start = offset ? g_ascii_strtoull (offset, NULL, 10) : 0;
  *end = size && g_ascii_strtoull (size, NULL, 10) ? *start + g_ascii_strtoull (size, NULL, 10)
                                                   : G_MAXUINT64;
  return TRUE;
}

static gboolean
may_share (const VbDeviceConfig *a, const VbDeviceConfig *b)
{
  guint64 a0, a1, b0, b1;

  return window_range (a, &a0, &a1) && window_range (b, &b0, &b1) && (a1 <= b0 || b1 <= a0);
}

/* Whether the block device @rdev, or a partition of it, is mounted. */
static char *
mounted_on (dev_t rdev)
{
  struct libmnt_table *table = mnt_new_table_from_file ("/proc/self/mountinfo");
  struct libmnt_iter *iter;
  struct libmnt_fs *fs;
  char *target = NULL;

  if (table == NULL)
    return NULL;
  iter = mnt_new_iter (MNT_ITER_FORWARD);
  while (target == NULL && mnt_table_next_fs (table, iter, &fs) == 0)
    {
      dev_t devno = mnt_fs_get_devno (fs);
      g_autofree char *part = NULL;

      if (devno == 0)
        continue;
      if (devno == rdev)
        {
          target = g_strdup (mnt_fs_get_target (fs));
          break;
        }
      /* a partition of rdev: its sysfs node sits under rdev's */
      part = g_strdup_printf ("/sys/dev/block/%u:%u/partition", major (devno), minor (devno));
      if (access (part, F_OK) == 0)
        {
          g_autofree char *link
              = g_strdup_printf ("/sys/dev/block/%u:%u", major (devno), minor (devno));
          g_autofree char *resolved = realpath (link, NULL);
          g_autofree char *parent = resolved ? g_path_get_dirname (resolved) : NULL;
          g_autofree char *dev_file = parent ? g_build_filename (parent, "dev", NULL) : NULL;
          g_autofree char *text = NULL;
          g_autofree char *want = g_strdup_printf ("%u:%u\n", major (rdev), minor (rdev));
          if (dev_file && g_file_get_contents (dev_file, &text, NULL, NULL)
              && strcmp (text, want) == 0)
            target = g_strdup (mnt_fs_get_target (fs));
        }
    }
  mnt_free_iter (iter);
  mnt_unref_table (table);
  return target;
}

static gboolean
block_in_use (const char *source, const char *path, GError **error)
{
  struct stat st;
  g_autofree char *target = NULL;
  int fd;

  if (path == NULL || stat (path, &st) < 0 || !S_ISBLK (st.st_mode))
    return TRUE;
  target = mounted_on (st.st_rdev);
  if (target)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA, "component '%s' is mounted on %s",
                   source, target);
      return FALSE;
    }
  /* O_EXCL on a block device fails while a filesystem, md or dm holds it;
   * read-only, so closing it sends udev no change event */
  fd = open (path, O_RDONLY | O_EXCL | O_CLOEXEC);
  if (fd < 0 && errno == EBUSY)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
          "component '%s' is in use (held open exclusively, e.g. by a filesystem or array)",
          source);
      return FALSE;
    }
  if (fd >= 0)
    close (fd);
  return TRUE;
}

gboolean
vb_probe_check_free (VbProbe *probe, const VbDeviceConfig *config, const VbDeviceConfig *holder,
                     GError **error)
{
  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      g_autofree char *id = identity_of (c->source);
      const char *path = c->source;
      gboolean held = FALSE;

      /* the running device itself holds its components (md claims them) */
      for (guint j = 0; holder && j < holder->components->len && !held; j++)
        held
            = strcmp (((VbComponentConfig *) holder->components->pdata[j])->source, c->source) == 0;
      if (held)
        continue;

      for (guint d = 0; d < probe->state->devices->len && !probe->by_superblock; d++)
        {
          const VbDeviceConfig *other = probe->state->devices->pdata[d];
          if (strcmp (other->name, config->name) == 0 || may_share (config, other))
            continue;
          for (guint j = 0; j < other->components->len; j++)
            {
              const VbComponentConfig *oc = other->components->pdata[j];
              g_autofree char *oid = identity_of (oc->source);
              if (strcmp (id, oid) == 0)
                {
                  g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                               "component '%s' is already used by device '%s'", c->source,
                               other->name);
                  return FALSE;
                }
            }
        }
      if (g_str_has_prefix (c->source, "vblk:") && probe->block_devices)
        path = g_hash_table_lookup (probe->block_devices, c->source + 5);
      if (!block_in_use (c->source, path, error))
        return FALSE;
    }
  return TRUE;
}

gboolean
vb_probe_node_unused (const char *name, const char *block_device, GError **error)
{
  g_autoptr (GError) local = NULL;

  if (block_in_use (block_device, block_device, &local))
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_BUSY, "device '%s' is in use: %s", name, local->message);
  return FALSE;
}
