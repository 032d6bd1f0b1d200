/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See engine-barrier.h. One mutex for everything: writes take it twice
 * (enter, leave), uncontended but for a job's steps. */
#include "config.h"

#include "engine-barrier.h"

void
engine_barrier_init (EngineBarrier *b)
{
  g_mutex_init (&b->lock);
  g_cond_init (&b->cond);
  b->writers = 0;
  b->closed = FALSE;
  b->waiting = NULL;
}

void
engine_barrier_clear (EngineBarrier *b)
{
  g_warn_if_fail (b->writers == 0 && !b->closed && b->waiting == NULL);
  g_mutex_clear (&b->lock);
  g_cond_clear (&b->cond);
}

gboolean
engine_barrier_try_enter (EngineBarrier *b, EngineBarrierWaiter *w)
{
  gboolean entered;

  g_mutex_lock (&b->lock);
  entered = !b->closed;
  if (entered)
    b->writers++;
  else
    {
      w->next = b->waiting;
      b->waiting = w;
    }
  g_mutex_unlock (&b->lock);
  return entered;
}

void
engine_barrier_leave (EngineBarrier *b)
{
  g_mutex_lock (&b->lock);
  g_assert (b->writers > 0);
  if (--b->writers == 0 && b->closed)
    g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
}

void
engine_barrier_close (EngineBarrier *b)
{
  g_mutex_lock (&b->lock);
  while (b->closed)
    g_cond_wait (&b->cond, &b->lock);
  b->closed = TRUE;
  while (b->writers > 0)
    g_cond_wait (&b->cond, &b->lock);
  g_mutex_unlock (&b->lock);
}

void
engine_barrier_open (EngineBarrier *b)
{
  EngineBarrierWaiter *w;

  g_mutex_lock (&b->lock);
  g_assert (b->closed);
  b->closed = FALSE;
  w = b->waiting;
  b->waiting = NULL;
  /* the waiting writes enter now, before anyone can close it again */
  for (EngineBarrierWaiter *x = w; x; x = x->next)
    b->writers++;
  /* blocked writers and closers */
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
  while (w)
    {
      EngineBarrierWaiter *next = w->next;
      vb_ring_post (w->ring, &w->op, 0);
      w = next;
    }
}
