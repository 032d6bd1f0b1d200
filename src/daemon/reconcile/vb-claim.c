/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The claim of a device's components (vb-claim.h). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-claim.h"

#include "vb-error.h"
#include "vb-graph.h"
#include "vb-util.h"

#include <string.h>

/* The device of this state whose node @owner is (any device: by UUID). */
static const VbDeviceConfig *
device_of_owner (const VbProbe *probe, const VbNodeOwner *owner)
{
  for (guint i = 0; probe->instance && i < probe->state->devices->len; i++)
    {
      const VbDeviceConfig *d = probe->state->devices->pdata[i];
      if (vb_node_owner_is (owner, probe->instance, d->uuid))
        return d;
    }
  return NULL;
}

static gboolean
refuse_vblk_node (VbProbe *probe, const VbDeviceConfig *config, const char *source,
                  const VbNodeOwner *owner, GError **error)
{
  const VbDeviceConfig *d = device_of_owner (probe, owner);

  if (g_strcmp0 (owner->instance, probe->instance) != 0)
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                 _ ("component '%s' is a block node of another vblkd (instance %s)"), source,
                 owner->instance);
  else if (owner->internal)
    g_set_error (
        error, VB_ERROR, VB_ERROR_BUSY,
        _ ("component '%s' is a node vblk uses inside device '%s' (%s backend), not a disk"),
        source, d ? d->name : owner->uuid, owner->backend);
  else if (d == NULL)
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                 _ ("component '%s' is a block node vblk made (for device %s, no longer known)"),
                 source, owner->uuid);
  else if (strcmp (d->uuid, config->uuid) == 0)
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                 _ ("component '%s' is the block node of device '%s' itself"), source, d->name);
  else
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                 _ ("component '%s' is the block node of device '%s' (to build on it, name it "
                    "'vblk:%s')"),
                 source, d->name, d->name);
  return FALSE;
}

/* A vblk node under the component that is @config's own or one built on
 * it: the device would hold itself. */
static gboolean
refuse_cycle (VbProbe *probe, const VbDeviceConfig *config, const char *source,
              const VbPathFacts *f, GError **error)
{
  g_autoptr (VbGraph) graph = NULL;
  g_auto (GStrv) above = NULL;

  /* on no vblk node (most components): no graph of every device */
  if (f->below == NULL || f->below->len == 0)
    return FALSE;
  graph = vb_graph_new_above (probe->state, config->name);
  above = vb_graph_stop_order (graph, config->name);
  for (guint i = 0; i < f->below->len; i++)
    {
      const VbDeviceConfig *d = device_of_owner (probe, f->below->pdata[i]);
      if (d && g_strv_contains ((const char *const *) above, d->name))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_DEPENDENCY_CYCLE,
                       _ ("component '%s' is built on the block node of device '%s'%s%s: '%s' "
                          "cannot hold itself"),
                       source, d->name, strcmp (d->name, config->name) == 0 ? "" : ", built on ",
                       strcmp (d->name, config->name) == 0 ? "" : config->name, config->name);
          return TRUE;
        }
    }
  return FALSE;
}

static gboolean
held_by (const VbDeviceConfig *holder, const char *source)
{
  for (guint j = 0; holder && j < holder->components->len; j++)
    if (strcmp (((VbComponentConfig *) holder->components->pdata[j])->source, source) == 0)
      return TRUE;
  return FALSE;
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

/* Every path component of the state's devices but @besides' and its
 * identity now, in one go once per probe (@besides' own, new ones among
 * them, are looked at by the claim itself): a path may lead elsewhere
 * since that device's last op (a file replaced, a link moved), and a
 * device that autostarts is started without a claim of its own. A path
 * is looked at again unless its memo (vb-identity-memo.h) shows it
 * cannot lead elsewhere since: its directories unchanged and stable, no
 * link, the mounts the same. (Identities kept between ops with no such
 * proof let a device be created on another's file, review of 6e53fa9.) */
static const GArray *
identities_of_all (VbProbe *probe, const char *besides)
{
  g_autoptr (GPtrArray) paths = NULL;
  g_autofree VbIdentity *ids = NULL;

  if (probe->identities && g_strcmp0 (probe->identities_besides, besides) == 0)
    return probe->identities;
  g_clear_pointer (&probe->identities, g_array_unref);
  g_free (probe->identities_besides);
  probe->identities_besides = g_strdup (besides);
  probe->identities = g_array_new (FALSE, FALSE, sizeof (VbProbeIdentity));
  paths = g_ptr_array_new ();
  for (guint d = 0; d < probe->state->devices->len; d++)
    {
      const VbDeviceConfig *device = probe->state->devices->pdata[d];
      for (guint j = 0; strcmp (device->name, besides) != 0 && j < device->components->len; j++)
        {
          const VbComponentConfig *c = device->components->pdata[j];
          VbProbeIdentity entry = { device, c->source, { 0 } };
          if (c->source[0] != '/')
            continue; /* vblk:NAME and nbd://: never the same file as a path */
          g_array_append_val (probe->identities, entry);
          g_ptr_array_add (paths, (gpointer) c->source);
        }
    }
  ids = g_new0 (VbIdentity, paths->len + 1);
  vb_inspect_identities ((const char *const *) paths->pdata, paths->len, VB_INSPECT_TIMEOUT_MS,
                         ids);
  for (guint i = 0; i < paths->len; i++)
    g_array_index (probe->identities, VbProbeIdentity, i).id = ids[i];
  return probe->identities;
}

/* @source (whose facts are @f) against every other device's components:
 * the same path, or another path to the same file or disk. */
static gboolean
check_shared (VbProbe *probe, const VbDeviceConfig *config, const char *source,
              const VbPathFacts *f, GError **error)
{
  VbIdentity id = vb_path_facts_identity (f);
  const GArray *all;

  if (probe->by_superblock)
    return TRUE;
  all = identities_of_all (probe, config->name);
  for (guint i = 0; i < all->len; i++)
    {
      const VbProbeIdentity *other = &g_array_index (all, VbProbeIdentity, i);
      /* the same file or path first: the others' configs are not read */
      if (!vb_identity_equal (&id, &other->id) && strcmp (other->source, source) != 0)
        continue;
      if (!may_share (config, other->device))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                       _ ("component '%s' is already used by device '%s'"), source,
                       other->device->name);
          return FALSE;
        }
    }
  return TRUE;
}

/* Mounted, held by the kernel, or held open exclusively. */
static gboolean
check_unused (const char *source, const VbPathFacts *f, GError **error)
{
  if (f->mounted_on)
    g_set_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA, _ ("component '%s' is mounted on %s"),
                 source, f->mounted_on);
  else if (f->holders)
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                 _ ("component '%s' is held by %s (a device-mapper or md device built on it)"),
                 source, f->holders);
  else if (f->exclusive)
    g_set_error (
        error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
        _ ("component '%s' is in use (held open exclusively, e.g. by a filesystem or array)"),
        source);
  else
    return TRUE;
  return FALSE;
}

static gboolean
claim_one (VbProbe *probe, const VbDeviceConfig *config, const VbComponentConfig *c,
           gboolean is_new, const VbDeviceConfig *holder, GError **error)
{
  g_autoptr (GError) local = NULL;
  const char *path = c->source;
  const VbPathFacts *f;
  VbSourceKind kind;

  if (!vb_source_parse (c->source, &kind, NULL, error))
    return FALSE;
  if (kind == VB_SOURCE_DEVICE)
    {
      /* a started device's node: mounted or held, it is someone else's */
      path
          = probe->block_devices ? g_hash_table_lookup (probe->block_devices, c->source + 5) : NULL;
      if (path == NULL || held_by (holder, c->source))
        return TRUE;
      f = vb_probe_facts (probe, path, VB_INSPECT_CLAIMS, &local);
      return f == NULL || check_unused (c->source, f, error);
    }
  if (kind != VB_SOURCE_PATH)
    return TRUE; /* NBD: refused by the probe, which says why */
  f = vb_probe_facts (probe, path, VB_INSPECT_CLAIMS, &local);
  if (f == NULL)
    {
      /* a component already configured may be gone: the probe decides
       * whether the device can do without it (so does the policy, which
       * records where the components it saw are while others are away) */
      if ((!is_new || probe->by_superblock)
          && g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (f->owned)
    return refuse_vblk_node (probe, config, c->source, &f->owner, error);
  if (f->engine_file)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   _ ("component '%s' is a file through which vblk's engine serves a device"),
                   c->source);
      return FALSE;
    }
  if (refuse_cycle (probe, config, c->source, f, error))
    return FALSE;
  if (!held_by (holder, c->source) && !check_unused (c->source, f, error))
    return FALSE;
  return check_shared (probe, config, c->source, f, error);
}

gboolean
vb_claim_device (VbProbe *probe, const VbDeviceConfig *config, const VbDeviceConfig *previous,
                 const VbDeviceConfig *holder, GError **error)
{
  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      gboolean is_new = previous == NULL || !held_by (previous, c->source);
      /* a component a spare or a replacement took the slot of is only
       * listed (for vbmgr remove), never opened: its path, stale since,
       * may lead anywhere now (a shared host reuses loop numbers) */
      if (!is_new && g_strcmp0 (c->role, "faulty") == 0)
        continue;
      /* the policy records where it found components; the paths it did
       * not touch may be stale (taken by another device since) */
      if (probe->by_superblock
          && (!is_new || (probe->found && !g_hash_table_contains (probe->found, c->source))))
        continue;
      if (!claim_one (probe, config, c, is_new, holder, error))
        return FALSE;
    }
  return TRUE;
}

#define EXCLUSIVE_RETRIES 10
#define EXCLUSIVE_RETRY_US (100 * 1000)

gboolean
vb_claim_node_unused (VbProbe *probe, const char *name, const char *block_device, GError **error)
{
  g_autoptr (GError) local = NULL;

  for (guint attempt = 0;; attempt++)
    {
      const VbPathFacts *f;

      g_hash_table_remove (probe->facts, block_device);
      f = vb_probe_facts (probe, block_device, VB_INSPECT_CLAIMS | VB_INSPECT_EXCLUSIVE, &local);
      if (f == NULL || check_unused (block_device, f, &local))
        return TRUE;
      /* an exclusive opener that is about to let go (a checker that just
       * ended, a probe) is waited for a moment; a mount is not */
      if (f->mounted_on || f->holders || attempt == EXCLUSIVE_RETRIES)
        break;
      g_clear_error (&local);
      g_usleep (EXCLUSIVE_RETRY_US);
    }
  g_set_error (error, VB_ERROR, VB_ERROR_BUSY, _ ("device '%s' is in use: %s"), name,
               local->message);
  return FALSE;
}
