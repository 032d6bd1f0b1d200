/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Hotplug's decisions: block devices that come and go, decided by the
 * policy rules (DESIGN.md data flow 3). vb-hotplug-events.c reads the udev
 * events and probes the device nodes; here the main thread asks the policy
 * what to do with each and acts through the same path as a D-Bus request.
 *
 *   assemble  a component of a known device: its path is recorded (disks
 *             come back in another order), and the device starts once all
 *             its slots are present, or degraded after start-degraded-after
 *   re-add    a returning component of a started device whose slot is
 *             faulty is put back through the bitmap (assemble does too)
 *   spare     a blank disk becomes a spare of the first listed device
 *             without one
 *   replace   a blank disk takes the faulty or missing slot of the first
 *             listed started device that has one, and is rebuilt
 *   ignore    nothing
 *
 * A component that goes away (a remove event, or a loop device being
 * detached) is marked faulty. A spare of a device moves to another device
 * of the same domain= that lost a component and has none. Every decision
 * is logged and emitted as Event('policy-decision'). */
#include "config.h"

#include "vb-hotplug.h"
#include "vb-hotplug-private.h"

#include "vb-policy.h"

#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

typedef struct {
  VbDaemon *daemon;
  GHashTable *degraded_waits; /* device name -> rounds a degraded start waited */
  GHashTable *present;        /* component UUID -> devnode, as last seen */
  GHashTable *timers;         /* device name -> source id (start degraded) */
  /* component UUIDs of slots that failed because their disk went away:
   * only such a disk is put back when it returns (one that failed on its
   * own, or was failed by the administrator, waits for an explicit re-add) */
  GHashTable *went_away;
  guint64 decisions;
} Hotplug;

static Hotplug hp;

/* helpers on the desired state */

static const VbDeviceConfig *
device_by_uuid (const VbState *state, const char *uuid)
{
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      if (strcmp (d->uuid, uuid) == 0)
        return d;
    }
  return NULL;
}

const char *
vb_hotplug_component_at (const char *devnode)
{
  GHashTableIter iter;
  gpointer uuid, node;

  if (hp.present == NULL)
    return NULL;
  g_hash_table_iter_init (&iter, hp.present);
  while (g_hash_table_iter_next (&iter, &uuid, &node))
    if (strcmp (node, devnode) == 0)
      return uuid;
  return NULL;
}

/* Slot @slot of a started device had no disk when it started. */
static gboolean
slot_missing (VbDaemon *daemon, const VbDeviceConfig *d, guint slot)
{
  const VbRunning *r = g_hash_table_lookup (daemon->running, d->uuid);
  const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;

  return backend && backend->engine && backend->engine->component_missing (r->block_device, slot);
}

/* The path a component was known by no longer leads to it: gone, a
 * detached loop device (size 0), or a node that now shows another
 * component. A path that still exists otherwise (an image file, say, that
 * someone also attached as a loop device) keeps the component. */
static gboolean
source_gone (const char *source)
{
  g_autofree char *size_path = NULL;
  g_autofree char *size = NULL;
  struct stat st;
  GHashTableIter iter;
  gpointer key, value;

  if (stat (source, &st) < 0)
    return TRUE;
  if (!S_ISBLK (st.st_mode))
    return FALSE;
  size_path = g_strdup_printf ("/sys/dev/block/%u:%u/size", major (st.st_rdev), minor (st.st_rdev));
  if (!g_file_get_contents (size_path, &size, NULL, NULL) || g_ascii_strtoull (size, NULL, 10) == 0)
    return TRUE;
  g_hash_table_iter_init (&iter, hp.present);
  while (g_hash_table_iter_next (&iter, &key, &value))
    if (strcmp (value, source) == 0)
      return TRUE; /* another component was seen there since */
  return FALSE;
}

/* Every slot's component has been seen with its superblock. */
static gboolean
complete (const VbDeviceConfig *d, guint *present)
{
  guint n = 0, slots = 0;

  for (guint j = 0; j < d->components->len; j++)
    {
      const VbComponentConfig *c = d->components->pdata[j];
      if (!vb_component_config_is_slot (c))
        continue;
      slots++;
      /* seen, and the desired state already names where */
      if (c->uuid && g_strcmp0 (g_hash_table_lookup (hp.present, c->uuid), c->source) == 0)
        n++;
    }
  if (present)
    *present = n;
  return n == slots;
}

static void
decision_event (const char *device, const VbHotplugItem *item, const VbPolicyRule *rule,
                const char *what, const char *why)
{
  GVariantBuilder b;

  hp.decisions++;
  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "devnode", g_variant_new_string (item->devnode));
  g_variant_builder_add (&b, "{sv}", "rule", g_variant_new_string (rule ? rule->name : ""));
  g_variant_builder_add (
      &b, "{sv}", "action",
      g_variant_new_string (rule ? vb_policy_action_to_string (rule->action) : "none"));
  g_variant_builder_add (&b, "{sv}", "decision", g_variant_new_string (what));
  g_variant_builder_add (&b, "{sv}", "why", g_variant_new_string (why ? why : ""));
  g_message ("vblk: policy: %s: %s (%s)", item->devnode, what, why ? why : "no rule");
  vb_daemon_publish_event (hp.daemon, "policy-decision", device, g_variant_builder_end (&b));
}

/* ops */

static void
op_logged (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  if (error)
    g_warning ("vblk: policy: %s: %s", (char *) user_data, error->message);
}

typedef struct {
  char *device;
  char *component_uuid;
  char *source;
  gboolean readd;
} Assembly;

static void
assembly_free (gpointer data)
{
  Assembly *a = data;

  g_free (a->device);
  g_free (a->component_uuid);
  g_free (a->source);
  g_free (a);
}

/* Paths move (disks come back in another order): each slot takes the path
 * its superblock was found on; a started device re-adds a returning slot. */
static gboolean
mutate_assemble (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                 GError **error)
{
  GPtrArray *assemblies = user_data;

  for (guint i = 0; i < assemblies->len; i++)
    {
      Assembly *a = assemblies->pdata[i];
      VbDeviceConfig *d = vb_state_lookup_mut (candidate, a->device);
      g_hash_table_add (intent->found, g_strdup (a->source));
      for (guint j = 0; d && j < d->components->len; j++)
        {
          VbComponentConfig *c = d->components->pdata[j];
          if (g_strcmp0 (c->uuid, a->component_uuid) != 0)
            continue;
          gboolean changed = FALSE;
          if (strcmp (c->source, a->source) != 0)
            {
              g_message ("vblk: policy: %s: component %s is now %s (was %s)", d->name, c->uuid,
                         a->source, c->source);
              /* the disks changed places: whoever named this path last gets
               * this one's old path, until its own disk says where it is */
              for (guint k = 0; k < candidate->devices->len; k++)
                {
                  const VbDeviceConfig *o = candidate->devices->pdata[k];
                  for (guint m = 0; m < o->components->len; m++)
                    {
                      const VbComponentConfig *oc = o->components->pdata[m];
                      if (oc != c && strcmp (oc->source, a->source) == 0)
                        {
                          /* its own copy first: the config may be shared */
                          VbDeviceConfig *w = vb_state_device_mut (candidate, k);
                          VbComponentConfig *wc = w->components->pdata[m];
                          g_free (wc->source);
                          wc->source = g_strdup (c->source);
                          vb_op_intent_touch (intent, w->name);
                          o = w;
                        }
                    }
                }
              g_free (c->source);
              c->source = g_strdup (a->source);
              changed = TRUE;
            }
          if (a->readd && vb_component_config_is_slot (c))
            {
              vb_op_intent_readd (intent, d->name, c);
              changed = TRUE;
            }
          if (changed)
            vb_op_intent_touch (intent, d->name);
        }
    }
  return TRUE;
}

static void consider_start (const char *name);

static void
assembled (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  GPtrArray *assemblies = user_data;

  if (error)
    g_warning ("vblk: policy: assembling: %s", error->message);
  for (guint i = 0; i < assemblies->len; i++)
    consider_start (((Assembly *) assemblies->pdata[i])->device);
}

static gboolean
mutate_start_device (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                     GError **error)
{
  const char *name = user_data;

  if (vb_state_lookup (candidate, name) == NULL)
    return TRUE;
  vb_op_intent_start (intent, candidate, name);
  /* wanted running already (it only lacked components): touched all the
   * same, so that the plan starts it */
  vb_op_intent_touch (intent, name);
  return TRUE;
}

/* A degraded start waits while events are still to be decided (one of
 * them may be the missing component, late on a busy host), for at most
 * this many rounds of this long. */
#define DEGRADED_WAIT_ROUNDS 20
#define DEGRADED_WAIT_MS 500

static gboolean start_degraded (gpointer data);

static gboolean
start_degraded (gpointer data)
{
  char *name = data;
  const VbDeviceConfig *d = vb_state_lookup (hp.daemon->desired, name);
  guint rounds = GPOINTER_TO_UINT (g_hash_table_lookup (hp.degraded_waits, name));

  g_hash_table_remove (hp.timers, name);
  if (d && vb_hotplug_events_undecided () && rounds < DEGRADED_WAIT_ROUNDS)
    {
      g_hash_table_insert (hp.degraded_waits, g_strdup (name), GUINT_TO_POINTER (rounds + 1));
      g_hash_table_insert (
          hp.timers, g_strdup (name),
          GUINT_TO_POINTER (g_timeout_add_full (G_PRIORITY_DEFAULT, DEGRADED_WAIT_MS,
                                                start_degraded, g_strdup (name), g_free)));
      return G_SOURCE_REMOVE;
    }
  g_hash_table_remove (hp.degraded_waits, name);
  /* only what the desired state wants running (stopped meanwhile: not) */
  if (d && d->started && !g_hash_table_contains (hp.daemon->running, d->uuid))
    {
      g_message ("vblk: policy: %s: starting degraded (start-degraded-after passed)", name);
      vb_daemon_submit (hp.daemon, name, mutate_start_device, VB_OP_CHANGE, NULL, op_logged,
                        g_strdup (name), g_free);
    }
  return G_SOURCE_REMOVE;
}

/* A device whose components showed up: start it when all are there (if
 * the administrator wants it running), or arm the degraded start. */
static void
consider_start (const char *name)
{
  const VbDeviceConfig *d = vb_state_lookup (hp.daemon->desired, name);
  guint present = 0;

  if (d == NULL || !d->started || g_hash_table_contains (hp.daemon->running, d->uuid))
    return;
  if (complete (d, &present))
    {
      guint id = GPOINTER_TO_UINT (g_hash_table_lookup (hp.timers, name));
      if (id)
        {
          g_source_remove (id);
          g_hash_table_remove (hp.timers, name);
        }
      g_message ("vblk: policy: %s: every component is present; starting", name);
      vb_daemon_submit (hp.daemon, name, mutate_start_device, VB_OP_CHANGE, NULL, op_logged,
                        g_strdup (name), g_free);
    }
}

static void
arm_degraded (const char *name, guint64 after_ms)
{
  if (after_ms == 0 || g_hash_table_contains (hp.timers, name))
    return;
  g_message ("vblk: policy: %s: incomplete; starting degraded in %" G_GUINT64_FORMAT " ms unless "
             "the rest appears",
             name, after_ms);
  g_hash_table_remove (hp.degraded_waits, name);
  g_hash_table_insert (hp.timers, g_strdup (name),
                       GUINT_TO_POINTER (g_timeout_add_full (
                           G_PRIORITY_DEFAULT, after_ms, start_degraded, g_strdup (name), g_free)));
}

/* Acting on one probed device node. */
/* Assemble, re-add: a component of a device vblk knows, back where it
 * was or on another path. */
static void
decide_assemble (VbHotplugItem *item, const VbPolicyRule *rule, const VbDeviceConfig *d,
                 const char *why, GPtrArray *assemblies)
{
  VbDaemon *daemon = hp.daemon;
  Assembly *a;
  gint slot = -1;

  if (!item->has_sb)
    {
      decision_event (NULL, item, rule, "nothing: no vblk superblock", why);
      return;
    }
  if (d == NULL)
    {
      decision_event (NULL, item, rule,
                      "nothing: a component of an unknown device (vbmgr scan --adopt)", why);
      return;
    }
  for (guint j = 0; j < d->components->len; j++)
    if (g_strcmp0 (((VbComponentConfig *) d->components->pdata[j])->uuid, item->sb.component_uuid)
        == 0)
      slot = vb_component_config_is_slot (d->components->pdata[j]) ? (gint) j : -2;
  if (slot == -1)
    {
      decision_event (d->name, item, rule, "nothing: not a component of the device now", why);
      return;
    }
  gboolean running = g_hash_table_contains (daemon->running, d->uuid);
  /* a disk that went away (or was not there at start) and is back —
   * an add event, or a change one (a loop device attached again): a
   * change event of a failed disk that stayed is no return. Its going
   * away is forgotten once it is seen again, whatever is done then: back
   * while its device was stopped, it was assembled, and a failure after
   * that is the administrator's or its I/O's (torture seed 2583291398,
   * step 15: the stale mark had the policy re-add a leg failed later) */
  gboolean came_back = g_hash_table_remove (hp.went_away, item->sb.component_uuid);
  gboolean failed = slot >= 0 && running && vb_hotplug_slot_failed (daemon, d, slot);
  gboolean moved = FALSE, elsewhere = FALSE,
           readd = failed && (came_back || slot_missing (daemon, d, slot));
  for (guint j = 0; j < d->components->len; j++)
    {
      const VbComponentConfig *c = d->components->pdata[j];
      if (g_strcmp0 (c->uuid, item->sb.component_uuid) == 0)
        {
          elsewhere = strcmp (c->source, item->devnode) != 0;
          moved = elsewhere && source_gone (c->source);
        }
    }
  /* a failed component back (the administrator's failure, or I/O errors):
   * said, not taken */
  if (failed && !readd && !moved && (elsewhere || strcmp (item->action, "add") == 0))
    {
      decision_event (d->name, item, rule,
                      "nothing: its slot failed; it comes back only through an explicit re-add "
                      "(vbmgr add DEVICE PATH)",
                      why);
      return;
    }
  /* a started device's healthy component, where it was: nothing new */
  if (running && !moved && !readd)
    return;
  a = g_new0 (Assembly, 1);
  a->device = g_strdup (d->name);
  a->component_uuid = g_strdup (item->sb.component_uuid);
  a->source = g_strdup (item->devnode);
  a->readd = readd;
  g_ptr_array_add (assemblies, a);
  decision_event (d->name, item, rule, a->readd ? "re-add" : "assemble", why);
  /* raid0 and linear have no degraded start: they wait for every
   * component */
  const VbDriver *driver = vb_driver_lookup (d->driver);
  if (d->started && !g_hash_table_contains (daemon->running, d->uuid) && !complete (d, NULL)
      && driver && driver->redundant)
    arm_degraded (d->name, rule->start_degraded_after_ms);
  return;
}

/* Spare, replace: a blank disk joins the first listed device that wants
 * it. */
static void
decide_blank (VbHotplugItem *item, const VbPolicyRule *rule, const char *why)
{
  VbDaemon *daemon = hp.daemon;
  const VbDeviceConfig *target = NULL;

  if (strcmp (item->metadata, "none") != 0)
    {
      decision_event (NULL, item, rule, "nothing: only a blank disk is taken", why);
      return;
    }
  if (vb_hotplug_blank_taken (daemon, daemon->desired, item->devnode))
    return;
  for (guint k = 0; rule->devices && rule->devices[k] && target == NULL; k++)
    {
      const VbDeviceConfig *t = vb_state_lookup (daemon->desired, rule->devices[k]);
      if (t == NULL || !vb_driver_takes_spares (vb_driver_lookup (t->driver), t->attributes))
        continue;
      if (rule->action == VB_POLICY_SPARE && vb_hotplug_n_spares (t) == 0)
        target = t;
      if (rule->action == VB_POLICY_REPLACE)
        for (guint j = 0; j < t->components->len && target == NULL; j++)
          {
            const VbComponentConfig *c = t->components->pdata[j];
            if (vb_component_config_is_slot (c) && g_hash_table_contains (daemon->running, t->uuid)
                && (vb_hotplug_slot_failed (daemon, t, j)
                    || !g_hash_table_contains (hp.present, c->uuid)))
              target = t;
          }
    }
  if (target == NULL)
    {
      decision_event (NULL, item, rule,
                      rule->action == VB_POLICY_SPARE
                          ? "nothing: every listed device has a spare"
                          : "nothing: no listed device has a failed component",
                      why);
      return;
    }
  decision_event (target->name, item, rule, rule->action == VB_POLICY_SPARE ? "spare" : "replace",
                  why);
  vb_hotplug_take_blank (daemon, target->name, item->devnode, rule->action == VB_POLICY_REPLACE);
  return;
}

static void
decide (VbHotplugItem *item, GPtrArray *assemblies)
{
  VbDaemon *daemon = hp.daemon;
  VbPolicy *policy = daemon->policy;
  g_autofree char *why = NULL;
  const VbPolicyRule *rule;
  const VbDeviceConfig *d = NULL;
  g_autofree char *size = g_strdup_printf ("%" G_GUINT64_FORMAT, item->size);
  VbPolicyInput in = {
    .properties = item->properties,
    .size = item->size,
    .metadata = item->metadata,
    .device_uuid = item->has_sb ? item->sb.device_uuid : NULL,
    .device_name = item->has_sb ? item->sb.device_name : NULL,
  };

  if (item->vblk_node)
    {
      g_debug ("vblk: policy: %s: %s; not a disk for the rules", item->devnode, item->vblk_node);
      return;
    }
  if (item->has_sb)
    {
      g_hash_table_replace (hp.present, g_strdup (item->sb.component_uuid),
                            g_strdup (item->devnode));
      d = device_by_uuid (daemon->desired, item->sb.device_uuid);
    }
  rule = policy ? vb_policy_evaluate (policy, &in, &why) : NULL;
  if (rule == NULL || rule->action == VB_POLICY_IGNORE)
    {
      /* quiet for what never concerned us: only say so for our metadata */
      if (item->has_sb || rule != NULL)
        decision_event (d ? d->name : NULL, item, rule, "nothing", why);
      return;
    }
  if (rule->action == VB_POLICY_ASSEMBLE || rule->action == VB_POLICY_READD)
    decide_assemble (item, rule, d, why, assemblies);
  else if (rule->action == VB_POLICY_SPARE || rule->action == VB_POLICY_REPLACE)
    decide_blank (item, rule, why);
}

/* A slot whose node went away: it fails, and the engine lets go of the node. */
typedef struct {
  char *device;
  guint index;
  char *node;
} Gone;

static void
gone_free (gpointer data)
{
  Gone *g = data;

  g_free (g->device);
  g_free (g->node);
  g_free (g);
}

static void
gone_logged (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  const Gone *g = user_data;

  if (error)
    g_warning ("vblk: policy: %s: %s went away: %s", g->device, g->node, error->message);
}

static gboolean
mutate_gone (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
             GError **error)
{
  const Gone *g = user_data;

  vb_op_intent_fault (intent, g->device, g->index, g->node);
  return TRUE;
}

/* A device node went away: a slot it held in a started device fails. */
static void
gone (VbHotplugItem *item)
{
  VbDaemon *daemon = hp.daemon;
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, hp.present);
  while (g_hash_table_iter_next (&iter, &key, &value))
    if (strcmp (value, item->devnode) == 0)
      g_hash_table_iter_remove (&iter);
  /* nothing started, nothing held the node (no walk of every device at
   * each node that goes while thousands are configured) */
  for (guint i = 0; g_hash_table_size (daemon->running) > 0 && i < daemon->desired->devices->len;
       i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (daemon->running, d->uuid);
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      for (guint j = 0; backend && backend->engine && j < d->components->len; j++)
        {
          const VbComponentConfig *c = d->components->pdata[j];
          if (!vb_component_config_is_slot (c) || strcmp (c->source, item->devnode) != 0
              || vb_hotplug_slot_failed (daemon, d, j))
            continue;
          g_message ("vblk: policy: %s: component %s (%s) went away", d->name, c->source,
                     item->action);
          if (c->uuid)
            g_hash_table_add (hp.went_away, g_strdup (c->uuid));
          /* on the op worker: the engine writes the survivors' superblocks */
          Gone *g = g_new0 (Gone, 1);
          g->device = g_strdup (d->name);
          g->index = j;
          g->node = g_strdup (item->devnode);
          vb_daemon_submit (daemon, g->device, mutate_gone, VB_OP_CHANGE, NULL, gone_logged, g,
                            gone_free);
        }
    }
}

/* Main thread, a batch that the worker probed. */
static void
decide_batch (GPtrArray *items)
{
  g_autoptr (GPtrArray) assemblies = g_ptr_array_new_with_free_func (assembly_free);

  for (guint i = 0; i < items->len; i++)
    {
      VbHotplugItem *item = items->pdata[i];
      if (item->skip)
        continue;
      if (item->gone)
        gone (item);
      else
        decide (item, assemblies);
    }
  if (assemblies->len > 0)
    vb_daemon_submit (hp.daemon, NULL, mutate_assemble, VB_OP_POLICY, NULL, assembled,
                      g_steal_pointer (&assemblies), (GDestroyNotify) g_ptr_array_unref);
}

static const VbHotplugDecider decider = {
  .decide = decide_batch,
  .gone = gone,
};

void
vb_hotplug_init (VbDaemon *daemon)
{
  hp.daemon = daemon;
  hp.present = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  hp.timers = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  hp.degraded_waits = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  hp.went_away = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  vb_hotplug_spares_init (daemon, hp.present);
  vb_hotplug_events_init (daemon, &decider);
}

void
vb_hotplug_watch_fd (int fd)
{
  vb_hotplug_events_watch_fd (fd);
}

/* How long a start waits for events to be decided, in rounds of this long. */
#define SETTLE_ROUNDS 100
#define SETTLE_ROUND_MS 50

typedef struct {
  GFunc func;
  gpointer data;
  guint rounds;
} Settling;

static gboolean
settle_round (gpointer user_data)
{
  Settling *s = user_data;

  if (vb_hotplug_events_undecided () && ++s->rounds < SETTLE_ROUNDS)
    return G_SOURCE_CONTINUE;
  s->func (s->data, NULL);
  g_free (s);
  return G_SOURCE_REMOVE;
}

void
vb_hotplug_when_settled (GFunc func, gpointer data)
{
  Settling *s;

  if (!vb_hotplug_events_undecided ())
    {
      func (data, NULL);
      return;
    }
  s = g_new0 (Settling, 1);
  s->func = func;
  s->data = data;
  g_timeout_add (SETTLE_ROUND_MS, settle_round, s);
}

void
vb_hotplug_forget_gone (const char *component_uuid)
{
  if (hp.went_away != NULL && component_uuid != NULL)
    g_hash_table_remove (hp.went_away, component_uuid);
}

guint64
vb_hotplug_decisions (void)
{
  return hp.decisions;
}
