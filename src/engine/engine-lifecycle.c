/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's top layer: a started device's engine made from its
 * components (assembled from their metadata where it has some), started,
 * quiesced, updated and freed; and the failure rule's upper half — what
 * follows once a component has turned faulty. The layers below it are
 * listed in engine-state.h. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "engine-spare.h"

#include "vb-error.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Set as VbEngine.component_failed: component @i has just turned faulty. */
static void
on_component_failed (VbEngine *e, guint i, int err)
{
  /* the survivors' superblocks say so before the I/O that found it
   * completes (and before any write that skips it does) */
  if (e->meta)
    engine_meta_record_failure (e, i);
  if (e->redundant && !vb_engine_can_lose (e, G_MAXUINT))
    {
      g_atomic_int_set (&e->lost, 1);
      engine_report (e, VB_REPORT_WARNING,
                     "no complete copy of the data is left; the device refuses writes");
    }
  if (e->failure_func)
    e->failure_func (e, i, err, e->failure_data);
  if (e->meta && engine_meta_has_spare (e))
    engine_spare_take (e, i);
}

/* metadata=none: the desired state says which copies are behind (rebuilt
 * in full at activation) and which failed (out until a re-add); one must
 * be in sync. */
static gboolean
mark_slots_behind (VbEngine *e, const VbEngineIdentity *identity, GError **error)
{
  guint readable = 0;

  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      if (identity->failed && identity->failed[i] && !c->missing)
        {
          g_atomic_int_set (&c->faulty, 1);
          g_atomic_int_set (&c->recorded, 1);
        }
      else if (identity->out_of_sync[i] && !c->missing)
        {
          g_atomic_int_set (&c->rebuilding, 1);
          c->full_rebuild = TRUE;
          e->need_rebuild = TRUE;
        }
      else
        readable += !engine_is_faulty (c);
    }
  if (readable > 0)
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
               _ ("device '%s': no component is in sync (the desired state names none "
                  "that is here); refusing to start"),
               e->name);
  return FALSE;
}

VbEngine *
vb_engine_new (const char *name, const VbDriver *driver, GHashTable *attributes, guint n_components,
               const VbEngineSource *sources, const VbComponentInfo *infos,
               const VbEngineIdentity *identity, gboolean read_only, GError **error)
{
  g_autoptr (VbEngine) e = g_new0 (VbEngine, 1);
  guint32 align = 512;

  g_return_val_if_fail (driver->layout != NULL && driver->map != NULL, NULL);

  e->name = g_strdup (name);
  e->resync_frontier = G_MAXUINT64;
  e->component_failed = on_component_failed;
  e->driver = driver;
  e->read_only = read_only;
  e->n = n_components;
  e->components = g_new0 (Component, n_components);
  engine_barrier_init (&e->barrier);
  g_mutex_init (&e->sync_lock);
  g_mutex_init (&e->slot_lock);
  for (guint i = 0; i < n_components; i++)
    e->components[i].fd = -1;
  driver->layout (attributes, infos, n_components, &e->layout);

  for (guint i = 0; i < n_components; i++)
    {
      if (identity && identity->errors)
        e->components[i].errors = identity->errors[i];
      if (!engine_component_open (&e->components[i], &sources[i], &infos[i], read_only, &align,
                                  error))
        return NULL;
    }
  e->block_size = align;
  if (e->layout.size % align != 0)
    e->layout.size -= e->layout.size % align;

  e->redundant = e->layout.copies > 1;
  if (g_hash_table_contains (attributes, "sync_speed_min"))
    engine_meta_set_speeds (e, vb_attr_get_u64 (attributes, "sync_speed_min"),
                            vb_attr_get_u64 (attributes, "sync_speed_max"));
  if (strcmp (driver->name, "faulty") == 0)
    {
      VbFaultSpec spec;
      e->fault = vb_fault_new ();
      vb_fault_spec_from_attributes (attributes, &spec);
      vb_fault_set (e->fault, &spec);
    }
  if (e->redundant && !vb_engine_can_lose (e, G_MAXUINT))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("device '%s': too many components are missing: some data has no copy left"),
                   name);
      return NULL;
    }
  if (identity && identity->out_of_sync && e->redundant && vb_driver_data_offset (attributes) == 0
      && !mark_slots_behind (e, identity, error))
    return NULL;
  if (vb_driver_data_offset (attributes) > 0)
    {
      for (guint i = 0; i < n_components; i++)
        e->components[i].data_offset = vb_driver_data_offset (attributes);
      if (!engine_meta_assemble (e, identity, attributes, error))
        return NULL;
    }
  return g_steal_pointer (&e);
}

void
vb_engine_free (VbEngine *e)
{
  if (e == NULL)
    return;
  /* no spare takes a slot from here on (a job's last failure) */
  g_atomic_int_set (&e->quiesced, 1);
  engine_spare_join (e);
  engine_sync_stop (e);
  engine_sweeper_stop (e);
  if (e->meta)
    {
      engine_meta_close (e);
      engine_meta_free (e);
    }
  for (guint i = 0; i < e->n; i++)
    engine_component_close (&e->components[i]);
  for (guint i = 0; e->kept_fds && i < e->kept_fds->len; i++)
    close (g_array_index (e->kept_fds, int, i));
  g_clear_pointer (&e->kept_fds, g_array_unref);
  vb_fault_free (e->fault);
  engine_barrier_clear (&e->barrier);
  g_mutex_clear (&e->sync_lock);
  g_mutex_clear (&e->slot_lock);
  g_free (e->components);
  g_free (e->name);
  g_free (e);
}

void
vb_engine_free_unclean (VbEngine *e)
{
  if (e && e->meta)
    engine_meta_forget (e);
  vb_engine_free (e);
}

void
vb_engine_quiesce (VbEngine *e)
{
  g_atomic_int_set (&e->quiesced, 1);
  engine_spare_join (e);
  engine_sync_stop (e);
  engine_sweeper_stop (e);
}

void
vb_engine_resume (VbEngine *e)
{
  g_atomic_int_set (&e->quiesced, 0);
  engine_sync_start_needed (e, engine_meta_needs_sync (e));
}

void
vb_engine_activate (VbEngine *e)
{
  engine_sync_start_needed (e, e->meta ? engine_meta_need_sync_at_start (e) : e->need_rebuild);
}

void
vb_engine_set_failure_func (VbEngine *e, VbEngineFailureFunc func, gpointer user_data)
{
  e->failure_func = func;
  e->failure_data = user_data;
}

void
vb_engine_set_job_func (VbEngine *e, VbEngineJobFunc func, gpointer user_data)
{
  e->job_func = func;
  e->job_data = user_data;
}

void
vb_engine_update (VbEngine *e, GHashTable *attributes)
{
  if (e->fault)
    {
      VbFaultSpec spec;
      vb_fault_spec_from_attributes (attributes, &spec);
      vb_fault_set (e->fault, &spec);
    }
  if (g_hash_table_contains (attributes, "sync_speed_min"))
    engine_meta_set_speeds (e, vb_attr_get_u64 (attributes, "sync_speed_min"),
                            vb_attr_get_u64 (attributes, "sync_speed_max"));
  /* the superblocks carry the attribute text */
  if (e->meta)
    engine_meta_set_attributes (e, attributes);
}

const char *
vb_engine_name (VbEngine *e)
{
  return e->name;
}

guint
vb_engine_n_components (VbEngine *e)
{
  return e->n;
}

/* The placement repeats with a period no longer than n × copies chunks
 * (raid10 near) and is uniform otherwise; checking one period of pieces
 * tells whether any data would be left without a healthy copy. */
gboolean
vb_engine_lost_data (VbEngine *e)
{
  return e->redundant && !vb_engine_can_lose (e, G_MAXUINT);
}

gboolean
vb_engine_can_lose (VbEngine *e, guint lost)
{
  guint64 step = e->layout.chunk_size ? e->layout.chunk_size : e->layout.size;
  guint64 span = MIN (e->layout.size, step * MAX (1u, e->n) * MAX (1u, e->layout.copies));

  if (!e->redundant)
    return FALSE;
  for (guint64 off = 0; off < span;)
    {
      VbMapping m;
      guint healthy = 0;
      e->driver->map (&e->layout, off, span - off, &m);
      for (guint k = 0; k < m.n_copies; k++)
        {
          guint c = m.copies[k].component;
          if (c != lost && engine_leg_readable (&e->components[c]))
            healthy++;
        }
      if (healthy == 0)
        return FALSE;
      off += m.length;
    }
  return TRUE;
}

int
vb_engine_set_faulty (VbEngine *e, guint i)
{
  g_return_val_if_fail (i < e->n, -EINVAL);
  if (!e->redundant)
    return -ENOTSUP;
  if (engine_is_faulty (&e->components[i]))
    return 0;
  if (!vb_engine_can_lose (e, i))
    return -EBUSY;
  /* -ECANCELED tells the listener it was asked for, not an I/O error */
  engine_component_failed (e, i, -ECANCELED);
  return 0;
}

void
vb_engine_release_component (VbEngine *e, guint i)
{
  g_autofree char *uuid = NULL;

  g_return_if_fail (i < e->n);
  if (engine_component_release (e, i, &uuid) && e->meta)
    engine_meta_record_gone (e, i, uuid);
}

/* A slot whose component went away, or was not there at the start: the
 * table says missing (engine_meta_record_gone, the assembly). A failed
 * one the table says faulty is not missing, wherever its disk is. */
gboolean
vb_engine_component_missing (VbEngine *e, guint i)
{
  Component *c;

  g_return_val_if_fail (i < e->n, FALSE);
  c = &e->components[i];
  if (!engine_is_faulty (c))
    return FALSE;
  if (e->meta == NULL)
    return c->missing;
  return engine_meta_role_state (e, i) == VB_ROLE_MISSING;
}
