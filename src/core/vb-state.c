/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The desired state's model (see vb-state.h): the device and component
 * configs, their copying, freeing and equality, and lookups by name.
 * state.json is read in vb-state-parse.c and written in vb-state-file.c. */
#include "config.h"

#include "vb-state.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Data structures                                                      */

VbComponentConfig *
vb_component_config_new (const char *source, const char *role, const char *uuid)
{
  VbComponentConfig *c = g_new0 (VbComponentConfig, 1);

  c->source = g_strdup (source);
  c->role = g_strdup (role);
  c->uuid = g_strdup (uuid);
  return c;
}

gboolean
vb_component_config_is_slot (const VbComponentConfig *c)
{
  return g_ascii_isdigit (c->role[0]);
}

guint
vb_device_config_n_slots (const VbDeviceConfig *d)
{
  guint n = 0;

  for (guint i = 0; i < d->components->len; i++)
    n += vb_component_config_is_slot (d->components->pdata[i]);
  return n;
}

VbComponentConfig *
vb_component_config_copy (const VbComponentConfig *c)
{
  g_return_val_if_fail (c != NULL, NULL);

  VbComponentConfig *copy = vb_component_config_new (c->source, c->role, c->uuid);

  copy->behind = c->behind;
  copy->faulty = c->faulty;
  return copy;
}

void
vb_component_config_free (VbComponentConfig *c)
{
  if (c == NULL)
    return;
  g_free (c->source);
  g_free (c->role);
  g_free (c->uuid);
  g_free (c);
}

VbDeviceConfig *
vb_device_config_new (const char *name, const char *uuid, const char *driver, const char *backend)
{
  VbDeviceConfig *d = g_new0 (VbDeviceConfig, 1);

  d->name = g_strdup (name);
  d->uuid = g_strdup (uuid);
  d->driver = g_strdup (driver);
  d->backend = g_strdup (backend != NULL ? backend : "auto");
  d->attributes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  d->components = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_component_config_free);
  d->exports = g_ptr_array_new_with_free_func (g_free);
  d->autostart = TRUE;
  d->started = FALSE;
  d->refs = 1;
  return d;
}

VbDeviceConfig *
vb_device_config_copy (const VbDeviceConfig *d)
{
  VbDeviceConfig *copy;
  GHashTableIter iter;
  gpointer key, value;

  g_return_val_if_fail (d != NULL, NULL);

  copy = vb_device_config_new (d->name, d->uuid, d->driver, d->backend);
  g_hash_table_iter_init (&iter, d->attributes);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (copy->attributes, g_strdup (key), g_strdup (value));
  for (guint i = 0; i < d->components->len; i++)
    g_ptr_array_add (copy->components, vb_component_config_copy (d->components->pdata[i]));
  for (guint i = 0; i < d->exports->len; i++)
    g_ptr_array_add (copy->exports, g_strdup (d->exports->pdata[i]));
  copy->autostart = d->autostart;
  copy->started = d->started;
  return copy;
}

/* VBLK_TEST_FROZEN=1 (the integration tests): every config held by two
 * states is checked, whenever a reference comes or goes, against its
 * digest when it was first shared — a change in place, which would
 * change another state (an op's snapshot, vblkd's desired state) behind
 * its back, stops vblkd (g_critical, fatal in the tests). */
static gboolean
frozen_checked (void)
{
  static gint checked = -1;

  if (g_atomic_int_get (&checked) < 0)
    g_atomic_int_set (&checked, g_strcmp0 (g_getenv ("VBLK_TEST_FROZEN"), "1") == 0);
  return g_atomic_int_get (&checked) == 1;
}

gboolean
vb_state_test_checks (void)
{
  return frozen_checked ();
}

static guint
mix (guint h, const char *text)
{
  return h * 31 + (text ? g_str_hash (text) : 7);
}

static guint
config_digest (const VbDeviceConfig *d)
{
  guint h = mix (mix (mix (mix (17, d->name), d->uuid), d->driver), d->backend);
  guint attrs = 0;
  GHashTableIter iter;
  gpointer key, value;

  h = h * 31 + (d->autostart ? 2 : 0) + (d->started ? 1 : 0);
  g_hash_table_iter_init (&iter, d->attributes);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      /* summed, in no order; mixed first, so that two values swapped
       * between their keys change the sum */
      guint e = mix (g_str_hash (key), value);
      e = (e ^ (e >> 16)) * 0x45d9f3bu;
      attrs += e ^ (e >> 16);
    }
  h = h * 31 + attrs;
  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      h = mix (mix (mix (h, c->source), c->role), c->uuid) * 4 + (c->behind ? 2 : 0)
          + (c->faulty ? 1 : 0);
    }
  for (guint i = 0; i < d->exports->len; i++)
    h = mix (h, d->exports->pdata[i]);
  return h;
}

static void
frozen_check (const VbDeviceConfig *d)
{
  if (d->frozen != config_digest (d))
    g_critical ("device '%s': its config, held by two states, was changed in place", d->name);
}

VbDeviceConfig *
vb_device_config_ref (VbDeviceConfig *d)
{
  if (frozen_checked ())
    {
      if (g_atomic_int_get (&d->refs) == 1)
        d->frozen = config_digest (d);
      else
        frozen_check (d);
    }
  g_atomic_int_inc (&d->refs);
  return d;
}

void
vb_device_config_free (VbDeviceConfig *d)
{
  if (d == NULL)
    return;
  if (frozen_checked () && g_atomic_int_get (&d->refs) > 1)
    frozen_check (d);
  if (!g_atomic_int_dec_and_test (&d->refs))
    return;
  g_free (d->name);
  g_free (d->uuid);
  g_free (d->driver);
  g_free (d->backend);
  g_hash_table_unref (d->attributes);
  g_ptr_array_unref (d->components);
  g_ptr_array_unref (d->exports);
  g_free (d);
}

gboolean
vb_attributes_equal (GHashTable *a, GHashTable *b)
{
  GHashTableIter iter;
  gpointer key, value;

  if (g_hash_table_size (a) != g_hash_table_size (b))
    return FALSE;
  g_hash_table_iter_init (&iter, a);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      const char *other;

      if (!g_hash_table_lookup_extended (b, key, NULL, (gpointer *) &other))
        return FALSE;
      if (g_strcmp0 (value, other) != 0)
        return FALSE;
    }
  return TRUE;
}

gboolean
vb_device_config_equal (const VbDeviceConfig *a, const VbDeviceConfig *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  if (a == b)
    return TRUE; /* shared (vb_state_share) */
  if (g_strcmp0 (a->name, b->name) != 0 || g_strcmp0 (a->uuid, b->uuid) != 0
      || g_strcmp0 (a->driver, b->driver) != 0 || g_strcmp0 (a->backend, b->backend) != 0
      || !a->autostart != !b->autostart || !a->started != !b->started)
    return FALSE;
  if (!vb_attributes_equal (a->attributes, b->attributes))
    return FALSE;
  if (a->components->len != b->components->len || a->exports->len != b->exports->len)
    return FALSE;
  for (guint i = 0; i < a->components->len; i++)
    {
      const VbComponentConfig *ca = a->components->pdata[i];
      const VbComponentConfig *cb = b->components->pdata[i];

      if (g_strcmp0 (ca->source, cb->source) != 0 || g_strcmp0 (ca->role, cb->role) != 0
          || g_strcmp0 (ca->uuid, cb->uuid) != 0 || !ca->behind != !cb->behind
          || !ca->faulty != !cb->faulty)
        return FALSE;
    }
  for (guint i = 0; i < a->exports->len; i++)
    if (g_strcmp0 (a->exports->pdata[i], b->exports->pdata[i]) != 0)
      return FALSE;
  return TRUE;
}

/* ------------------------------------------------------------------ */
/* The index of names                                                   */

/* Open addressing over positions: a slot holds a name's hash and its
 * position + 1 (0: empty). The names are read from the state itself, so
 * the index owns no strings and states that share their configs at the
 * same places share it. It covers the positions below @covered; devices
 * appended since are found by a scan of the tail, and an index whose
 * tail grew long is built again (the one it replaces stays alive with
 * it: another thread may be reading it). */
typedef struct {
  guint hash;
  guint at; /* position + 1 */
} IndexSlot;

struct _VbStateIndex {
  gint refs;
  guint covered;
  guint mask;
  VbStateIndex *older;
  IndexSlot slots[];
};

#define INDEX_MIN_DEVICES 32 /* below it a scan is as fast */
#define INDEX_MAX_TAIL(covered) (64 + (covered) / 8)

static VbStateIndex *
index_ref (VbStateIndex *index)
{
  if (index)
    g_atomic_int_inc (&index->refs);
  return index;
}

static void
index_unref (VbStateIndex *index)
{
  while (index && g_atomic_int_dec_and_test (&index->refs))
    {
      VbStateIndex *older = index->older;
      g_free (index);
      index = older;
    }
}

static VbStateIndex *
index_build (const GPtrArray *devices)
{
  guint size = 1;
  VbStateIndex *index;

  while (size < devices->len * 2)
    size <<= 1;
  index = g_malloc0 (sizeof (VbStateIndex) + size * sizeof (IndexSlot));
  index->refs = 1;
  index->covered = devices->len;
  index->mask = size - 1;
  for (guint i = 0; i < devices->len; i++)
    {
      const char *name = ((const VbDeviceConfig *) devices->pdata[i])->name;
      guint hash = g_str_hash (name);
      guint s = hash & index->mask;

      /* a name twice (never in a valid state): the first place, as a scan */
      for (; index->slots[s].at; s = (s + 1) & index->mask)
        if (index->slots[s].hash == hash
            && strcmp (((const VbDeviceConfig *) devices->pdata[index->slots[s].at - 1])->name,
                       name)
                   == 0)
          break;
      if (index->slots[s].at == 0)
        index->slots[s] = (IndexSlot){ hash, i + 1 };
    }
  return index;
}

static gint
scan (const GPtrArray *devices, guint from, const char *name)
{
  for (guint i = from; i < devices->len; i++)
    if (g_strcmp0 (((const VbDeviceConfig *) devices->pdata[i])->name, name) == 0)
      return (gint) i;
  return -1;
}

/* @state's index, built or built again when missing or its tail long */
static VbStateIndex *
index_of_state (const VbState *state)
{
  VbState *shared = (VbState *) state; /* the index is a cache: built from any thread */
  VbStateIndex *index = g_atomic_pointer_get (&shared->index);
  VbStateIndex *built;

  if (index && index->covered <= state->devices->len
      && state->devices->len - index->covered <= INDEX_MAX_TAIL (index->covered))
    return index;
  built = index_build (state->devices);
  built->older = index;
  if (g_atomic_pointer_compare_and_exchange (&shared->index, index, built))
    return built;
  built->older = NULL;
  index_unref (built);
  return g_atomic_pointer_get (&shared->index);
}

static gint
index_find (const VbState *state, const VbStateIndex *index, const char *name)
{
  guint hash = g_str_hash (name);

  for (guint s = hash & index->mask; index->slots[s].at; s = (s + 1) & index->mask)
    {
      guint at = index->slots[s].at - 1;
      if (index->slots[s].hash == hash && at < state->devices->len
          && g_strcmp0 (((const VbDeviceConfig *) state->devices->pdata[at])->name, name) == 0)
        return (gint) at;
    }
  return scan (state->devices, index->covered, name);
}

VbState *
vb_state_new (void)
{
  VbState *state = g_new0 (VbState, 1);

  state->devices = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_device_config_free);
  return state;
}

VbState *
vb_state_copy (const VbState *state)
{
  VbState *copy;

  g_return_val_if_fail (state != NULL, NULL);

  copy = vb_state_new ();
  for (guint i = 0; i < state->devices->len; i++)
    g_ptr_array_add (copy->devices, vb_device_config_copy (state->devices->pdata[i]));
  copy->index = index_ref (g_atomic_pointer_get (&((VbState *) state)->index));
  return copy;
}

VbState *
vb_state_share (const VbState *state)
{
  VbState *copy;

  g_return_val_if_fail (state != NULL, NULL);

  copy = vb_state_new ();
  g_ptr_array_set_size (copy->devices, (gint) state->devices->len);
  for (guint i = 0; i < state->devices->len; i++)
    {
      VbDeviceConfig *d = state->devices->pdata[i];
      vb_device_config_ref (d);
      copy->devices->pdata[i] = d;
    }
  copy->index = index_ref (g_atomic_pointer_get (&((VbState *) state)->index));
  return copy;
}

void
vb_state_free (VbState *state)
{
  if (state == NULL)
    return;
  g_ptr_array_unref (state->devices);
  index_unref (state->index);
  g_free (state);
}

gint
vb_state_index_of (const VbState *state, const char *name)
{
  VbStateIndex *index;
  gint at;

  g_return_val_if_fail (state != NULL, -1);
  g_return_val_if_fail (name != NULL, -1);

  if (state->devices->len < INDEX_MIN_DEVICES)
    return scan (state->devices, 0, name);
  index = index_of_state (state);
  at = index->covered <= state->devices->len ? index_find (state, index, name)
                                             : scan (state->devices, 0, name);
  if (frozen_checked () && at != scan (state->devices, 0, name))
    g_critical ("state index: '%s' found at %d, a scan says %d (a change to the devices "
                "without vb_state_reindex)",
                name, at, scan (state->devices, 0, name));
  return at;
}

void
vb_state_reindex (VbState *state)
{
  index_unref (g_steal_pointer (&state->index));
}

const VbDeviceConfig *
vb_state_lookup (const VbState *state, const char *name)
{
  gint i = vb_state_index_of (state, name);

  return i < 0 ? NULL : state->devices->pdata[i];
}

VbDeviceConfig *
vb_state_device_mut (VbState *state, guint index)
{
  VbDeviceConfig *d;

  g_return_val_if_fail (index < state->devices->len, NULL);
  d = state->devices->pdata[index];
  if (g_atomic_int_get (&d->refs) > 1)
    {
      state->devices->pdata[index] = vb_device_config_copy (d);
      vb_device_config_free (d);
    }
  return state->devices->pdata[index];
}

VbDeviceConfig *
vb_state_lookup_mut (VbState *state, const char *name)
{
  gint i = vb_state_index_of (state, name);

  return i < 0 ? NULL : vb_state_device_mut (state, (guint) i);
}
