/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine devices this process serves, whichever kernel path carries
 * their I/O (backend loop through FUSE, backend nbd through the kernel
 * nbd client): the engine behind its switch, registered by block node,
 * and the backend callbacks that only talk to the engine. A backend adds
 * its transport (how the kernel reaches the switch) and the node. */
#pragma once

#include <glib.h>

#include "backend.h"
#include "engine-switch.h"

G_BEGIN_DECLS

typedef struct _VbEngineRuntime VbEngineRuntime;

struct _VbEngineRuntime {
  char *uuid;
  char *block_device; /* set by vb_engine_runtime_register */
  VbEngineSwitch *sw;
  /* the backend's: what serves the switch to the kernel */
  gpointer transport;
  GDestroyNotify transport_free; /* called before the switch is freed */
  /* the transport serves requests in the kernel's buffers (ublk zero
   * copy): a component this process serves in place cannot join */
  gboolean zero_copy;
  /* tells the kernel the device's new size after a reconfiguration */
  gboolean (*announce_size) (VbEngineRuntime *rt, GError **error);
  /* the node still carries the transport's I/O (NULL: while registered):
   * a loop detached behind vblkd's back may be attached again for another
   * device, under the same name */
  gboolean (*serves) (VbEngineRuntime *rt);
};

/* The engine of @request behind a new switch (resync or rebuild not begun
 * yet: vb_engine_runtime_register starts them); failures and jobs are
 * reported to the daemon. Refused (VB_ERROR_BUSY) while a runtime of the
 * same device is registered, serving or not. */
VbEngineRuntime *vb_engine_runtime_new (const VbBackendRequest *request, GError **error);
/* Frees transport, switch and engine; unregistered before. */
void vb_engine_runtime_free (VbEngineRuntime *rt);
/* @rt now serves @block_device; its engine's resync or rebuild begins. */
void vb_engine_runtime_register (VbEngineRuntime *rt, const char *block_device);
/* Takes @block_device's runtime out of the registry (NULL: none). */
VbEngineRuntime *vb_engine_runtime_unregister (const char *block_device);
/* Takes @rt out of the registry if it is still there under its node's
 * name (not another registered under that name since). */
gboolean vb_engine_runtime_take (VbEngineRuntime *rt);
/* @block_device's runtime, NULL when none is registered or its node no
 * longer carries its I/O (vb_engine_runtime_serves). */
VbEngineRuntime *vb_engine_runtime_lookup (const char *block_device);
/* @rt's node still carries its I/O (the backend's serves, if any). */
gboolean vb_engine_runtime_serves (VbEngineRuntime *rt);
/* Calls @func on each registered runtime, under the registry's lock. */
void vb_engine_runtime_foreach (void (*func) (VbEngineRuntime *rt, gpointer data), gpointer data);

/* Superblocks and an all-dirty bitmap on the components of a new device
 * (or a stopped device's reconfigured role table). */
gboolean vb_engine_runtime_format (const VbBackendRequest *request, GError **error);

/* VbBackend.supports of a backend that always serves the engine (ublk,
 * nbd): an engine driver; a driver with one extent only when attribute
 * engine=true asks for the engine; never metadata=md1. */
gboolean vb_engine_runtime_supports (const VbDriver *driver, GHashTable *attributes, char **reason);

/* The backend callbacks that concern only the engine. */
char *vb_engine_runtime_slot_source (const char *block_device, guint slot);
gboolean vb_engine_runtime_component_status (const char *block_device, guint component,
                                             gboolean *faulty, gboolean *rebuilding,
                                             guint64 *errors);
gboolean vb_engine_runtime_component_missing (const char *block_device, guint component);
gboolean vb_engine_runtime_lost_data (const char *block_device);
gboolean vb_engine_runtime_set_faulty (const char *block_device, guint component, GError **error);
void vb_engine_runtime_release (const char *block_device, guint component);
gboolean vb_engine_runtime_block_ops (const char *block_device, const VbBlockOps **ops,
                                      void **handle);
gboolean vb_engine_runtime_check (const char *block_device, gboolean repair, guint64 *job,
                                  GError **error);
gboolean vb_engine_runtime_cancel_job (const char *block_device, guint64 job, GError **error);
gboolean vb_engine_runtime_readd (const char *block_device, guint slot, const char *path,
                                  const char *uuid, GError **error);
void vb_engine_runtime_set_spares (const char *block_device, guint n, const char *const *paths,
                                   const char *const *uuids);
/* The engine takes its online attributes. */
gboolean vb_engine_runtime_update (const char *block_device, const VbBackendRequest *request,
                                   GError **error);
/* Online reconfiguration (VbBackend.reconfigure) of a registered engine
 * device; a new size is announced through rt->announce_size. */
gboolean vb_engine_runtime_reconfigure (const char *block_device, const VbBackendRequest *request,
                                        guint timeout_ms, VbReconfigureReport *report,
                                        GError **error);

/* What an engine device of this process offers (VbBackend.engine of
 * every backend that serves the engine). */
extern const VbEngineDeviceOps vb_engine_runtime_ops;

/* The capabilities of a backend that serves the engine. */
#define VB_ENGINE_RUNTIME_CAPABILITIES                                                             \
  (VB_BACKEND_CAN_FORMAT | VB_BACKEND_CAN_RECONFIGURE | VB_BACKEND_SERVES_ENGINE)

G_END_DECLS
