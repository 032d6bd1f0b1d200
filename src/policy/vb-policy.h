/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy engine's rules: what vblkd does, unattended, with a block device
 * that appears (assemble, re-add, spare, replace, ignore). Pure logic: rule
 * files in, a decision out; no D-Bus, no udev, no I/O but reading the files.
 *
 * Rule files (GKeyFile syntax), every *.rules file of a directory in name
 * order (byte order; hidden files skipped), rules in file order:
 *
 *   # comments are whole lines starting with '#': "key=value # text" would
 *   # make "# text" part of the value, so such a value is refused
 *   [rule spare-pool]
 *   match.ID_BUS=ata          udev property PROPERTY against a glob (* and ?)
 *   match.size=>=100G         OP SIZE: OP one of < <= > >= =, SIZE in bytes
 *                             or with K M G T (powers of 1024; iB, B optional)
 *   match.metadata=none       vblk | none (blank) | unknown (another signature) | any
 *   match.uuid=5d0f*          glob on the device UUID of the disk's vblk superblock
 *   match.device=data         glob on the device name of the disk's vblk superblock
 *   action=spare              assemble | re-add | spare | replace | ignore (required)
 *   devices=data,backup       the devices that may take the disk (not with ignore)
 *   start-degraded-after=30s  assemble only: ms, s, m or h; 0 or never = never
 *   domain=pool1              spare and replace only: the spare domain
 *
 * Within a rule every match.* key must hold (all of); a rule without any
 * match.* key matches every disk. A missing udev property, or a disk without
 * a vblk superblock for match.uuid / match.device, never matches. The first
 * rule that matches decides; when none does, vblkd does nothing. Leading and
 * trailing blanks of values are ignored. Every error is reported as
 * "FILE:LINE: message" and the whole load fails. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  VB_POLICY_ASSEMBLE,
  VB_POLICY_READD,
  VB_POLICY_SPARE,
  VB_POLICY_REPLACE,
  VB_POLICY_IGNORE,
} VbPolicyAction;

/* "assemble", "re-add", "spare", "replace", "ignore" */
const char *vb_policy_action_to_string (VbPolicyAction a);

/* What is known of one block device. */
typedef struct {
  GHashTable *properties;  /* udev properties (char* -> char*), e.g. ID_BUS, ID_SERIAL, DEVNAME */
  guint64 size;            /* bytes */
  const char *metadata;    /* "vblk" (a vblk superblock), "none" (no signature at all:
                              blank), "unknown" (another signature: ID_FS_TYPE etc.) */
  const char *device_uuid; /* from its vblk superblock, or NULL */
  const char *device_name; /* from its vblk superblock, or NULL */
} VbPolicyInput;

typedef struct {
  char *name; /* from [rule NAME] */
  char *file; /* where the group starts */
  guint line;
  VbPolicyAction action;
  char **devices;                  /* devices= list, or NULL (any) */
  guint64 start_degraded_after_ms; /* start-degraded-after= (e.g. 30s, 500ms, 2m; 0 = never) */
  char *domain;                    /* domain= or NULL */
  /*< private >*/
  GPtrArray *matches; /* VbPolicyMatch*, in file order */
} VbPolicyRule;

/* Immutable once loaded; refcounted (the count is atomic). */
typedef struct _VbPolicy VbPolicy;

VbPolicy *vb_policy_new_empty (void);
/* Every *.rules file of @dir, in name order (a missing dir = no rules); a
 * syntax or semantic error anywhere -> NULL with VB_ERROR_INVALID_ARGUMENT
 * "FILE:LINE: message" (FILE the full path). A file that cannot be read ->
 * VB_ERROR_FAILED naming it. */
VbPolicy *vb_policy_load_dir (const char *dir, GError **error);
/* The rules of several directories, the first the one that wins: a file
 * name in an earlier directory hides the same name in later ones (the
 * administrator's /etc/vblk/policy.d over the vendor's copy under
 * /usr/share; an empty file, or a link to /dev/null, hides one without a
 * rule in its place). The files are read in name order across them. */
VbPolicy *vb_policy_load_dirs (const char *const *dirs, GError **error);
/* The rules of one file's @text; @file names it in rules and errors. */
VbPolicy *vb_policy_load_data (const char *file, const char *text, GError **error);
VbPolicy *vb_policy_ref (VbPolicy *p);
void vb_policy_unref (VbPolicy *p);
guint vb_policy_n_rules (VbPolicy *p);
const VbPolicyRule *vb_policy_rule (VbPolicy *p, guint i);
/* "spare-pool (/etc/vblk/policy.d/x.rules:3): action=spare match.ID_BUS=ata ..." */
char *vb_policy_rule_to_string (const VbPolicyRule *r);
/* First matching rule wins; NULL when none matches (then: do nothing).
 * @why (optional): human text of what matched, or why each rule did not. */
const VbPolicyRule *vb_policy_evaluate (VbPolicy *p, const VbPolicyInput *in, char **why);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbPolicy, vb_policy_unref)

G_END_DECLS
