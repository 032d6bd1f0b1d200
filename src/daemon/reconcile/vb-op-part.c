/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The part of the dependency graph an op may change, so that ops run side
 * by side: the connected parts (in the desired state before and after its
 * mutate) of the devices it names, with every component source of theirs
 * (two devices naming one path are one part, for the claim). Ops whose
 * parts share nothing run at the same time; and what each wrote is merged
 * back part by part. */
#include "config.h"

#include "vb-op.h"

#include <string.h>

#define PART_DEVICE "device:"
#define PART_SOURCE "source:"

static GHashTable *
index_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) g_ptr_array_unref);
}

/* @d's entries in @above: its name under each device it is built on. */
static void
index_add (GHashTable *above, const VbDeviceConfig *d)
{
  for (guint j = 0; j < d->components->len; j++)
    {
      const char *source
          = vb_device_source_name (((VbComponentConfig *) d->components->pdata[j])->source);
      GPtrArray *list;

      if (source == NULL)
        continue;
      list = g_hash_table_lookup (above, source);
      if (list == NULL)
        g_hash_table_insert (above, (gpointer) source, list = g_ptr_array_new ());
      g_ptr_array_add (list, d->name);
    }
}

static void
index_remove (GHashTable *above, const VbDeviceConfig *d)
{
  for (guint j = 0; j < d->components->len; j++)
    {
      const char *source
          = vb_device_source_name (((VbComponentConfig *) d->components->pdata[j])->source);
      GPtrArray *list = source ? g_hash_table_lookup (above, source) : NULL;

      if (list)
        g_ptr_array_remove (list, d->name);
    }
}

/* device name -> GPtrArray of the names of the devices built on it (a
 * "vblk:NAME" component), from one pass over @state: no graph of the
 * thousands of devices that stand alone. */
static GHashTable *
dependents_index (const VbState *state)
{
  GHashTable *above = index_new ();

  for (guint i = 0; i < state->devices->len; i++)
    index_add (above, state->devices->pdata[i]);
  return above;
}

/* Every name's dependents in @a are its dependents in @b (as many). */
static gboolean
index_within (GHashTable *a, GHashTable *b)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, a);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      GPtrArray *list = value, *other = g_hash_table_lookup (b, key);
      if (list->len != (other ? other->len : 0))
        return FALSE;
      for (guint i = 0; i < list->len; i++)
        if (!g_ptr_array_find_with_equal_func (other, list->pdata[i], g_str_equal, NULL))
          return FALSE;
    }
  return TRUE;
}

/* @after's index from @before's (@above_before), when @after keeps
 * @before's devices in their places — the same configs but for the few a
 * mutate replaced (copy on write) — and may add some at the end: the
 * replaced ones' entries taken out and put in again, one comparison of
 * pointers per device rather than a walk of every device's components.
 * NULL when devices went or moved. */
static GHashTable *
dependents_index_after (GHashTable *above_before, const VbState *before, const VbState *after)
{
  g_autoptr (GHashTable) above = index_new ();
  GHashTableIter iter;
  gpointer key, value;

  if (after->devices->len < before->devices->len)
    return NULL;
  g_hash_table_iter_init (&iter, above_before);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_insert (above, key, g_ptr_array_copy (value, NULL, NULL));
  for (guint i = 0; i < after->devices->len; i++)
    {
      const VbDeviceConfig *was = i < before->devices->len ? before->devices->pdata[i] : NULL;
      const VbDeviceConfig *d = after->devices->pdata[i];

      if (was == d)
        continue;
      if (was && strcmp (was->name, d->name) != 0)
        return NULL;
      if (was)
        index_remove (above, was);
      index_add (above, d);
    }
  return g_steal_pointer (&above);
}

/* Adds the connected part of @name in @state (@above: its
 * dependents_index). */
static void
add_connected (GHashTable *part, const VbState *state, GHashTable *above, const char *name)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GPtrArray) todo = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (todo, g_strdup (name));
  for (guint i = 0; i < todo->len; i++)
    {
      const char *n = todo->pdata[i];
      const VbDeviceConfig *d;
      GPtrArray *dependents;

      if (!g_hash_table_add (seen, g_strdup (n)))
        continue;
      g_hash_table_add (part, g_strconcat (PART_DEVICE, n, NULL));
      dependents = g_hash_table_lookup (above, n);
      for (guint j = 0; dependents && j < dependents->len; j++)
        g_ptr_array_add (todo, g_strdup (dependents->pdata[j]));
      d = vb_state_lookup (state, n);
      if (d == NULL)
        continue;
      for (guint j = 0; j < d->components->len; j++)
        {
          const char *source = ((VbComponentConfig *) d->components->pdata[j])->source;
          g_hash_table_add (part, g_strconcat (PART_SOURCE, source, NULL));
          if (g_str_has_prefix (source, VB_DEVICE_SOURCE_PREFIX))
            g_ptr_array_add (todo, g_strdup (source + strlen (VB_DEVICE_SOURCE_PREFIX)));
        }
    }
}

GHashTable *
vb_op_part_index (const VbState *state)
{
  return dependents_index (state);
}

GHashTable *
vb_op_part_in (const VbState *state, GHashTable *above, const char *name)
{
  GHashTable *part = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  add_connected (part, state, above, name);
  return part;
}

/* vb_op_part_new, with @before's index when the caller has it (NULL:
 * built here). */
static GHashTable *
part_new (const VbState *before, GHashTable *above, const VbState *after, const char *const *names)
{
  GHashTable *part = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) built = above ? NULL : dependents_index (before);
  GHashTable *above_before = above ? above : built;
  g_autoptr (GHashTable) above_after = NULL;

  if (after)
    {
      above_after = dependents_index_after (above_before, before, after);
      if (above_after == NULL)
        above_after = dependents_index (after);
      else if (vb_state_test_checks ())
        {
          g_autoptr (GHashTable) full = dependents_index (after);
          if (!index_within (full, above_after) || !index_within (above_after, full))
            g_critical ("op part: the dependents index derived from the state before its "
                        "mutate differs from the one built anew");
        }
    }
  for (guint i = 0; names[i]; i++)
    {
      add_connected (part, before, above_before, names[i]);
      if (after)
        add_connected (part, after, above_after, names[i]);
    }
  return part;
}

GHashTable *
vb_op_part_new (const VbState *before, const VbState *after, const char *const *names)
{
  return part_new (before, NULL, after, names);
}

/* The op's part once its mutate ran: what it names, what it touched and
 * what its intent acts on. */
GHashTable *
vb_op_part_of (VbOp *op, GHashTable *above)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new ();

  g_ptr_array_add (names, op->device);
  g_ptr_array_extend (names, op->intent.touched, NULL, NULL);
  for (guint i = 0; i < op->intent.readds->len; i++)
    g_ptr_array_add (names, g_array_index (op->intent.readds, VbOpReadd, i).device);
  for (guint i = 0; i < op->intent.faults->len; i++)
    g_ptr_array_add (names, g_array_index (op->intent.faults, VbOpFault, i).device);
  if (op->intent.reconfigure)
    g_ptr_array_add (names, op->intent.reconfigure);
  g_ptr_array_add (names, NULL);
  return part_new (op->previous, above, op->candidate, (const char *const *) names->pdata);
}

gboolean
vb_op_parts_meet (GHashTable *a, GHashTable *b)
{
  GHashTableIter iter;
  gpointer key;

  if (a == NULL || b == NULL)
    return TRUE;
  if (g_hash_table_size (a) > g_hash_table_size (b))
    return vb_op_parts_meet (b, a);
  g_hash_table_iter_init (&iter, a);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_hash_table_contains (b, key))
      return TRUE;
  return FALSE;
}

/* Union-find over the keys of parts ("device:NAME", "source:PATH"). */
static const char *
root_of (GHashTable *parent, const char *key)
{
  const char *up;

  while ((up = g_hash_table_lookup (parent, key)) != NULL && strcmp (up, key) != 0)
    {
      const char *upper = g_hash_table_lookup (parent, up);
      /* halving the path as it goes */
      g_hash_table_insert (parent, (gpointer) key, (gpointer) upper);
      key = upper;
    }
  return key;
}

static void
join (GHashTable *parent, GStringChunk *keys, const char *a, const char *b)
{
  const char *ka = g_string_chunk_insert_const (keys, a);
  const char *kb = g_string_chunk_insert_const (keys, b);

  if (!g_hash_table_contains (parent, ka))
    g_hash_table_insert (parent, (gpointer) ka, (gpointer) ka);
  if (!g_hash_table_contains (parent, kb))
    g_hash_table_insert (parent, (gpointer) kb, (gpointer) kb);
  ka = root_of (parent, ka);
  kb = root_of (parent, kb);
  if (ka != kb)
    g_hash_table_insert (parent, (gpointer) ka, (gpointer) kb);
}

GHashTable *
vb_op_parts_busy (const VbState *state, GPtrArray *ops)
{
  GHashTable *busy = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) parent = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) busy_roots = g_hash_table_new (g_direct_hash, g_direct_equal);
  /* "source:PATH" -> the "device:NAME" keys naming it (a part holds the
   * sources of its devices; it does not grow through them) */
  g_autoptr (GHashTable) users
      = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) g_ptr_array_unref);
  GStringChunk *keys = g_string_chunk_new (4096);
  gboolean all = FALSE;

  for (guint i = 0; i < ops->len; i++)
    all = all || ((VbOp *) ops->pdata[i])->part == NULL;
  for (guint i = 0; !all && i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      g_autofree char *dkey = g_strconcat (PART_DEVICE, d->name, NULL);
      const char *k = g_string_chunk_insert_const (keys, dkey);

      join (parent, keys, k, k);
      for (guint j = 0; j < d->components->len; j++)
        {
          const char *source = ((VbComponentConfig *) d->components->pdata[j])->source;
          g_autofree char *skey = g_strconcat (PART_SOURCE, source, NULL);
          const char *sk = g_string_chunk_insert_const (keys, skey);
          GPtrArray *list = g_hash_table_lookup (users, sk);

          if (list == NULL)
            g_hash_table_insert (users, (gpointer) sk, list = g_ptr_array_new ());
          g_ptr_array_add (list, (gpointer) k);
          if (g_str_has_prefix (source, VB_DEVICE_SOURCE_PREFIX))
            {
              g_autofree char *below
                  = g_strconcat (PART_DEVICE, source + strlen (VB_DEVICE_SOURCE_PREFIX), NULL);
              join (parent, keys, k, below);
            }
        }
    }
  /* the parts that run mark the parts of the devices they hold or whose
   * sources they hold */
  for (guint i = 0; !all && i < ops->len; i++)
    {
      GHashTableIter iter;
      gpointer key;

      g_hash_table_iter_init (&iter, ((VbOp *) ops->pdata[i])->part);
      while (g_hash_table_iter_next (&iter, &key, NULL))
        {
          const char *k = g_string_chunk_insert_const (keys, key);
          GPtrArray *list = g_hash_table_lookup (users, k);

          if (g_hash_table_contains (parent, k))
            g_hash_table_add (busy_roots, (gpointer) root_of (parent, k));
          for (guint j = 0; list && j < list->len; j++)
            g_hash_table_add (busy_roots, (gpointer) root_of (parent, list->pdata[j]));
        }
    }
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      g_autofree char *dkey = g_strconcat (PART_DEVICE, d->name, NULL);
      const char *k = g_string_chunk_insert_const (keys, dkey);

      if (all || g_hash_table_contains (busy_roots, root_of (parent, k)))
        g_hash_table_add (busy, d->name);
    }
  g_string_chunk_free (keys);
  return busy;
}

gboolean
vb_op_in_part (const VbOp *op, const char *name)
{
  g_autofree char *key = NULL;

  if (op->part == NULL)
    return TRUE;
  key = g_strconcat (PART_DEVICE, name, NULL);
  return g_hash_table_contains (op->part, key);
}

GHashTable *
vb_op_part_devices (const VbOp *op)
{
  GHashTable *names = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, op->part);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_str_has_prefix (key, PART_DEVICE))
      g_hash_table_add (names, (char *) key + strlen (PART_DEVICE));
  return names;
}

static gint
compare_ints (gconstpointer a, gconstpointer b)
{
  return *(const gint *) a - *(const gint *) b;
}

GArray *
vb_op_part_positions (const VbOp *op, const VbState *state)
{
  GArray *at = g_array_new (FALSE, FALSE, sizeof (gint));
  GHashTableIter iter;
  gpointer key;

  if (op->part == NULL)
    {
      for (gint i = 0; i < (gint) state->devices->len; i++)
        g_array_append_val (at, i);
      return at;
    }
  g_hash_table_iter_init (&iter, op->part);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      gint i;
      if (g_str_has_prefix (key, PART_DEVICE)
          && (i = vb_state_index_of (state, (char *) key + strlen (PART_DEVICE))) >= 0)
        g_array_append_val (at, i);
    }
  g_array_sort (at, compare_ints);
  return at;
}

/* The devices of @op's part as @from has them go into @into (those @from
 * lacks go out, those @into lacks come in last); NULL part: @into
 * becomes @from. */
void
vb_op_part_merge_state (const VbOp *op, VbState *into, const VbState *from)
{
  g_autoptr (GArray) added = g_array_new (FALSE, FALSE, sizeof (gint)); /* indexes in @from */
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, op->part);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      const char *name = key;
      gint at, in_from;

      if (!g_str_has_prefix (name, PART_DEVICE))
        continue;
      name += strlen (PART_DEVICE);
      at = vb_state_index_of (into, name);
      in_from = vb_state_index_of (from, name);
      if (at >= 0 && in_from < 0)
        {
          g_ptr_array_remove_index (into->devices, at);
          vb_state_reindex (into);
        }
      else if (at >= 0)
        {
          vb_device_config_free (into->devices->pdata[at]);
          into->devices->pdata[at] = vb_device_config_copy (from->devices->pdata[in_from]);
        }
      else if (in_from >= 0)
        g_array_append_val (added, in_from);
    }
  /* the new devices go last, after those other ops added meanwhile, in
   * @from's order: the store's journal records a change only while the
   * devices kept keep their order (at their places in @from, two ops
   * creating at once rewrote the whole state.json at every save) */
  g_array_sort (added, compare_ints);
  for (guint i = 0; i < added->len; i++)
    g_ptr_array_add (into->devices,
                     vb_device_config_copy (from->devices->pdata[g_array_index (added, gint, i)]));
}

static void
merge_uuid (GHashTable *into, GHashTable *from, const char *uuid)
{
  const VbRunning *r = g_hash_table_lookup (from, uuid);

  if (r)
    g_hash_table_replace (into, g_strdup (uuid), vb_running_copy (r));
  else
    g_hash_table_remove (into, uuid);
}

/* Likewise for what runs: the block nodes of the part's devices (before
 * and after the op) as @from has them. */
void
vb_op_part_merge_running (const VbOp *op, GHashTable *into, GHashTable *from)
{
  const VbState *states[] = { op->previous, op->candidate };
  g_autoptr (GHashTable) names = vb_op_part_devices (op);
  GHashTableIter iter;
  gpointer name;

  /* by the part's names: a search for each of a few, not a test of each
   * of thousands */
  g_hash_table_iter_init (&iter, names);
  while (g_hash_table_iter_next (&iter, &name, NULL))
    for (guint s = 0; s < G_N_ELEMENTS (states); s++)
      {
        const VbDeviceConfig *d = vb_state_lookup (states[s], name);
        if (d)
          merge_uuid (into, from, d->uuid);
      }
}
