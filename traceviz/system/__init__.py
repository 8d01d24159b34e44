"""The machine: process pools, memory, Ray, install hints."""
