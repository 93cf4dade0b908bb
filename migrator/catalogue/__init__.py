"""The ground floor of the rules: the YAML catalogue and its model (`loader`), the parser-neutral
`CallSite` (`site`), the registry that finds each rule's unit module by its derived name (`units`),
the contracts those modules implement (`protocols`), the shared kinds (`kinds`) and patterns
(`patterns`), and the generated docs (`docs`).

Nothing here imports anything above it: only the standard library, yaml and `migrator.ground.model`-level
modules. Rule units (`migrator/rules/<family>/<name>.py`) are reached by name through `units`.
"""
