from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User

from core.forms import UserAddForm, UserEditForm
from core.models import (
    ApiToken,
    Invite,
    Job,
    Membership,
    ProcessExit,
    Profile,
    Project,
    SweepRun,
    WorkerHeartbeat,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Invite)
class InviteAdmin(admin.ModelAdmin):
    list_display = ["project", "role", "uses", "max_uses", "expires_at", "revoked_at"]
    list_filter = ["role"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "label", "kind", "state", "project", "created_at", "finished_at"]
    list_filter = ["state", "kind", "queue"]
    search_fields = ["label", "error"]
    readonly_fields = ["traceback", "log", "result", "params"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "key_hint", "created_at", "last_used_at", "revoked_at"]
    exclude = ["key_hash"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "queues", "pid", "last_seen", "stopped_at"]


@admin.register(ProcessExit)
class ProcessExitAdmin(admin.ModelAdmin):
    list_display = ["program", "pid", "returncode", "started_at", "exited_at", "restart_delay"]
    list_filter = ["program"]
    readonly_fields = ["log_tail"]


@admin.register(SweepRun)
class SweepRunAdmin(admin.ModelAdmin):
    list_display = ["task", "last_run_at", "last_ok", "last_error"]


# Django's own user admin with forms that keep reserved names (core.usernames) free
admin.site.unregister(User)


class ProfileInline(admin.StackedInline):
    model = Profile
    can_delete = False
    # self-declared by the user (core.services.profile_country_set), never set for them
    readonly_fields = ["country", "country_declared_at"]


@admin.register(User)
class ReservedNamesUserAdmin(UserAdmin):
    add_form = UserAddForm
    form = UserEditForm
    inlines = [ProfileInline]
