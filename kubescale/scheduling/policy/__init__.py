"""The ``descheduler/v1alpha2`` DeschedulerPolicy: types, plugin arguments, loading."""
