"""The ground floor: clock, logging, flag types and small typed views of API objects.

Imports nothing of kubescale outside this package (a test walks the imports to keep it so).
"""
