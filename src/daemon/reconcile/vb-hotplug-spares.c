/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Hotplug's disks that join devices: a blank disk as a spare or in place
 * of a failed slot, and a spare moving to a device of its domain that lost
 * a component (vb-hotplug.c decides; this does). */
#include "config.h"

#include "vb-hotplug.h"
#include "vb-hotplug-private.h"
#include "vb-policy.h"

#include <string.h>

/* hotplug's, lent at start (vb_hotplug_spares_init) */
static struct {
  VbDaemon *daemon;
  GHashTable *present; /* component UUID -> path: seen (its superblock) since start */
} spares;

void
vb_hotplug_spares_init (VbDaemon *daemon, GHashTable *present)
{
  spares.daemon = daemon;
  spares.present = present;
}

/* The component was seen (its superblock) since vblkd started. */
static gboolean
seen (const char *component_uuid)
{
  return component_uuid && g_hash_table_contains (spares.present, component_uuid);
}

/* Whether a blank disk at @devnode is in use: a component of a device
 * without metadata, or a spare, or a slot that is not failed. A slot of a
 * device with metadata that names it but failed (the disk that was there
 * is gone, and a new one took its number) does not count: its own disk
 * would carry a superblock. */
gboolean
vb_hotplug_blank_taken (VbDaemon *daemon, const VbState *state, const char *devnode)
{
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      for (guint j = 0; j < d->components->len; j++)
        {
          const VbComponentConfig *c = d->components->pdata[j];
          if (strcmp (c->source, devnode) != 0 || g_strcmp0 (c->role, "faulty") == 0)
            continue;
          if (!vb_driver_has_metadata (d->attributes) || !vb_component_config_is_slot (c))
            return TRUE;
          if (g_hash_table_contains (daemon->running, d->uuid)
              && !vb_hotplug_slot_failed (daemon, d, j))
            return TRUE;
        }
    }
  return FALSE;
}

guint
vb_hotplug_n_spares (const VbDeviceConfig *d)
{
  guint n = 0;

  for (guint j = 0; j < d->components->len; j++)
    n += g_strcmp0 (((VbComponentConfig *) d->components->pdata[j])->role, "spare") == 0;
  return n;
}

/* Slot @slot of a started device is faulty (or missing) in its engine. */
gboolean
vb_hotplug_slot_failed (VbDaemon *daemon, const VbDeviceConfig *d, guint slot)
{
  const VbRunning *r = g_hash_table_lookup (daemon->running, d->uuid);
  const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
  gboolean faulty = FALSE, rebuilding = FALSE;
  guint64 errors = 0;

  return backend && backend->engine
         && backend->engine->component_status (r->block_device, slot, &faulty, &rebuilding, &errors)
         && faulty;
}

typedef struct {
  char *device;
  char *source;
  gboolean replace;  /* a faulty or missing slot, else a spare */
  char *domain_from; /* spare move: the device it leaves */
} Addition;

static void
addition_free (gpointer data)
{
  Addition *a = data;

  g_free (a->device);
  g_free (a->source);
  g_free (a->domain_from);
  g_free (a);
}

/* A blank disk as a spare, or in place of a failed slot (whose component
 * stays listed as "faulty"; its slot is rebuilt onto the new one). */
static gboolean
mutate_add (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
            GError **error)
{
  Addition *a = user_data;
  VbDeviceConfig *d = vb_state_lookup_mut (candidate, a->device);

  if (d == NULL || vb_hotplug_blank_taken (daemon, candidate, a->source))
    return TRUE;
  /* decided against the state of its batch's probe: another blank disk of
   * the same batch (a coldplug after a restart) may have become the spare
   * the rule asks for meanwhile */
  if (!a->replace && vb_hotplug_n_spares (d) > 0)
    {
      g_message ("vblk: policy: %s: %s: the device has a spare now; not taken", d->name, a->source);
      return TRUE;
    }
  /* a path one of its components still names (a failed slot whose disk
   * went away, and another disk took the number): no second component
   * may name it, which a spare would; a replacement takes the slot over */
  if (!a->replace)
    for (guint j = 0; j < d->components->len; j++)
      if (strcmp (((VbComponentConfig *) d->components->pdata[j])->source, a->source) == 0)
        {
          g_message ("vblk: policy: %s: %s is the path of a failed component; not a spare", d->name,
                     a->source);
          return TRUE;
        }
  if (!a->replace)
    g_ptr_array_add (d->components, vb_component_config_new (a->source, "spare", NULL));
  else
    {
      guint slot = G_MAXUINT;
      for (guint j = 0; j < d->components->len && slot == G_MAXUINT; j++)
        {
          VbComponentConfig *c = d->components->pdata[j];
          if (vb_component_config_is_slot (c)
              && (vb_hotplug_slot_failed (daemon, d, j) || !seen (c->uuid)))
            slot = j;
        }
      if (slot == G_MAXUINT)
        return TRUE;
      VbComponentConfig *old = d->components->pdata[slot];
      VbComponentConfig *nc = vb_component_config_new (a->source, old->role, NULL);
      d->components->pdata[slot] = nc;
      /* the replaced one stays listed (faulty) for vbmgr remove, unless the
       * new disk took its path: then nothing names it any more */
      if (strcmp (old->source, a->source) == 0)
        vb_component_config_free (old);
      else
        {
          g_free (old->role);
          old->role = g_strdup ("faulty");
          g_ptr_array_add (d->components, old);
        }
      nc->uuid = vb_uuid_new ();
      if (g_hash_table_contains (daemon->running, d->uuid))
        {
          vb_op_intent_readd (intent, d->name, nc);
        }
    }
  if (!a->replace)
    ((VbComponentConfig *) d->components->pdata[d->components->len - 1])->uuid = vb_uuid_new ();
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

static void
added (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  Addition *a = user_data;

  if (error)
    g_warning ("vblk: policy: %s: adding %s: %s", a->device, a->source, error->message);
}

void
vb_hotplug_take_blank (VbDaemon *daemon, const char *device, const char *devnode, gboolean replace)
{
  Addition *a = g_new0 (Addition, 1);

  a->device = g_strdup (device);
  a->source = g_strdup (devnode);
  a->replace = replace;
  vb_daemon_submit (daemon, a->device, mutate_add, VB_OP_CHANGE, NULL, added, a, addition_free);
}

/* spare domains */

static gboolean
mutate_move_spare (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                   GError **error)
{
  Addition *a = user_data;
  VbDeviceConfig *to = vb_state_lookup_mut (candidate, a->device);
  VbDeviceConfig *from = vb_state_lookup_mut (candidate, a->domain_from);

  if (to == NULL || from == NULL)
    return TRUE;
  for (guint j = 0; j < from->components->len; j++)
    {
      VbComponentConfig *c = from->components->pdata[j];
      if (g_strcmp0 (c->role, "spare") == 0 && strcmp (c->source, a->source) == 0)
        {
          g_ptr_array_add (to->components, vb_component_config_copy (c));
          g_ptr_array_remove_index (from->components, j);
          vb_op_intent_touch (intent, from->name);
          vb_op_intent_touch (intent, to->name);
          return TRUE;
        }
    }
  return TRUE;
}

static void
spare_moved (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  Addition *a = user_data;
  GVariantBuilder b;

  if (error)
    {
      g_warning ("vblk: policy: moving spare %s from %s to %s: %s", a->source, a->domain_from,
                 a->device, error->message);
      return;
    }
  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "from", g_variant_new_string (a->domain_from));
  g_variant_builder_add (&b, "{sv}", "source", g_variant_new_string (a->source));
  vb_daemon_publish_event (daemon, "spare-moved", a->device, g_variant_builder_end (&b));
}

void
vb_hotplug_component_failed (const char *device)
{
  VbDaemon *daemon = spares.daemon;
  const VbDeviceConfig *d = daemon->desired ? vb_state_lookup (daemon->desired, device) : NULL;
  VbPolicy *policy = daemon->policy;

  if (d == NULL || policy == NULL || vb_hotplug_n_spares (d) > 0)
    return;
  /* the rules that put the device in a domain name its partners */
  for (guint i = 0; i < vb_policy_n_rules (policy); i++)
    {
      const VbPolicyRule *rule = vb_policy_rule (policy, i);
      gboolean member = FALSE;
      if (rule->domain == NULL || rule->devices == NULL)
        continue;
      for (guint k = 0; rule->devices[k]; k++)
        member |= strcmp (rule->devices[k], device) == 0;
      for (guint k = 0; member && rule->devices[k]; k++)
        {
          const VbDeviceConfig *other = vb_state_lookup (daemon->desired, rule->devices[k]);
          if (other == NULL || other == d)
            continue;
          for (guint j = 0; j < other->components->len; j++)
            {
              const VbComponentConfig *c = other->components->pdata[j];
              if (g_strcmp0 (c->role, "spare") != 0)
                continue;
              Addition *a = g_new0 (Addition, 1);
              a->device = g_strdup (device);
              a->source = g_strdup (c->source);
              a->domain_from = g_strdup (other->name);
              g_message ("vblk: policy: %s lost a component: spare %s moves from %s (domain %s)",
                         device, c->source, other->name, rule->domain);
              vb_daemon_submit (daemon, a->device, mutate_move_spare, VB_OP_CHANGE, NULL,
                                spare_moved, a, addition_free);
              return;
            }
        }
    }
}
