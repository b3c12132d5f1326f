"""The ten strategy plugins of upstream's descheduler (``pkg/framework/plugins``)."""
