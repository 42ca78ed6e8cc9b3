//! Schema and properties: the commit's schema in Iceberg's terms (field ids kept stable
//! across versions), its partition spec, the table properties (the operator's, the
//! metrics mode, the name mapping with reserved ids for file columns readers must skip),
//! and the metadata builder that holds them, bound before any manifest is written.

use std::collections::HashMap;

use iceberg::spec::{
    NameMapping, PartitionSpec as IcebergSpec, PartitionSpecRef, Schema as IcebergSchema,
    SchemaRef, SortOrder, Summary, TableMetadata, TableMetadataBuilder, UnboundPartitionSpec,
    DEFAULT_SCHEMA_NAME_MAPPING,
};
use xlake_model::{ChangeSet, DeclaredTable, Schema};

use super::{json, Draft, Frame};
use crate::error::{IcebergError, Result};
use crate::ops::table::{
    IcebergTable, METRICS_MODE_DEFAULT, PUT_IF_ABSENT_VERIFIED, SOURCE_FORMAT_PROPERTY,
    SOURCE_STATE,
};
use crate::spec::layout::{metadata_file, METADATA_DIR};
use crate::spec::partition::{same_fields, to_unbound_spec};
use crate::spec::schema::{
    first_free_id, merge_mappings, name_mapping, reserved_mappings, to_iceberg_schema, Aliases,
    SchemaProblem,
};

/// The schema side of one commit, before any file is looked at.
pub(super) struct SchemaPlan {
    /// The commit's schema in Iceberg's terms.
    pub(super) converted: IcebergSchema,
    /// Whether it differs from the table's current schema (a new schema id).
    pub(super) changed: bool,
    pub(super) unbound: UnboundPartitionSpec,
    pub(super) properties: HashMap<String, String>,
    /// The highest id reserved for ignored file columns (`last-column-id` counts it).
    pub(super) reserved: Option<i32>,
    pub(super) mapping: NameMapping,
}

/// The schema and spec as bound by the builder (their ids), and the metadata staged with a
/// placeholder snapshot, which manifests need to find older specs and schemas.
pub(super) struct Bound {
    pub(super) staged: TableMetadata,
    pub(super) schema: SchemaRef,
    pub(super) spec: PartitionSpecRef,
}

impl IcebergTable {
    fn not_representable(&self, commit: &str) -> impl Fn(SchemaProblem) -> IcebergError + '_ {
        let commit = commit.to_string();
        move |p| IcebergError::SchemaNotRepresentable {
            table: self.table(),
            commit: commit.clone(),
            column: p.column,
            reason: p.reason,
        }
    }

    /// The schema, spec and properties of `change` on `current`.
    pub(super) fn plan_schema(
        &self,
        change: &ChangeSet,
        current: Option<&TableMetadata>,
    ) -> Result<SchemaPlan> {
        let not_representable = self.not_representable(&change.commit.id);
        let current_schema = current.map(|m| m.current_schema().clone());
        let next_schema_id = current.map_or(0, |m| {
            m.schemas_iter().map(|s| s.schema_id()).max().unwrap_or(0) + 1
        });
        let older: Vec<&IcebergSchema> = current.map_or(Vec::new(), |m| {
            let mut all: Vec<&IcebergSchema> = m
                .schemas_iter()
                .filter(|s| s.schema_id() != m.current_schema_id())
                .map(|s| s.as_ref())
                .collect();
            all.sort_by_key(|s| s.schema_id());
            all
        });
        let (converted, aliases) = to_iceberg_schema(
            &change.schema,
            current_schema.as_deref(),
            &older,
            current.map_or(0, |m| m.last_column_id()),
            next_schema_id,
        )
        .map_err(&not_representable)?;
        let changed = current_schema
            .as_ref()
            .is_none_or(|s| s.as_struct() != converted.as_struct());
        let unbound =
            to_unbound_spec(&change.partition_spec, &converted).map_err(&not_representable)?;
        let (mut properties, reserved, mapping) = self.commit_properties(
            &change.schema,
            (&converted, &aliases),
            &change.ignored_columns,
            current,
        );
        if let Some(state) = &change.source_state {
            properties.insert(SOURCE_STATE.to_string(), state.clone());
        }
        Ok(SchemaPlan {
            converted,
            changed,
            unbound,
            properties,
            reserved,
            mapping,
        })
    }

    /// Stage the plan with a placeholder snapshot, to learn the bound spec and schema ids
    /// the manifests need. The placeholder carries the commit's time (not the wall clock,
    /// which may lag a source's commit times), which stamps the metadata as the real
    /// commit will.
    pub(super) fn bind(
        &self,
        draft: &Draft<'_>,
        plan: &SchemaPlan,
        frame: &Frame,
    ) -> Result<Bound> {
        let current = draft.metadata.as_ref();
        let placeholder = Summary {
            operation: iceberg::spec::Operation::Append,
            additional_properties: HashMap::new(),
        };
        let schema_id = current.map_or(plan.converted.schema_id(), |m| {
            m.current_schema().schema_id()
        });
        let staged = self
            .base_builder(draft, plan)?
            .add_snapshot(frame.snapshot(String::new(), placeholder, schema_id, 0))
            .and_then(|b| b.build())
            .map_err(self.spec_error("apply schema and partition spec"))?
            .metadata;
        let schema: SchemaRef = staged.current_schema().clone();
        if schema.as_struct() != plan.converted.as_struct() {
            return Err(self.corrupt(METADATA_DIR, "schema ids were reassigned unexpectedly"));
        }
        let spec = staged.default_partition_spec().clone();
        Ok(Bound {
            staged,
            schema,
            spec,
        })
    }

    /// The table properties of a commit of the neutral `schema`, converted to `converted`:
    /// the operator's, the metrics mode, and the name mapping (merged with the table's so
    /// far, plus reserved entries for `ignored` file columns). Also the highest reserved id,
    /// which `last-column-id` must count, and the name mapping itself.
    fn commit_properties(
        &self,
        schema: &Schema,
        (converted, aliases): (&IcebergSchema, &Aliases),
        ignored: &[String],
        current: Option<&TableMetadata>,
    ) -> (HashMap<String, String>, Option<i32>, NameMapping) {
        let mut properties = self.properties.clone();
        // A commit is written only after put-if-absent was checked on this store.
        if let Some(store) = self.store.put_if_absent_identity() {
            properties.insert(PUT_IF_ABSENT_VERIFIED.to_string(), store.to_string());
        }
        // Bounds xlake writes are safe for pruning but not always exact (Delta truncates
        // timestamps, footers are rescaled, strings cut): engines must not answer MIN/MAX
        // from them, which Iceberg Spark does unless the metrics mode says counts.
        properties
            .entry(METRICS_MODE_DEFAULT.to_string())
            .or_insert_with(|| "counts".to_string());
        // Older snapshots still read through older schemas: keep their columns mapped.
        let previous: Option<NameMapping> = current
            .and_then(|m| m.properties().get(DEFAULT_SCHEMA_NAME_MAPPING))
            .and_then(|text| serde_json::from_str(text).ok());
        let mut mapping = name_mapping(converted, aliases);
        // File columns the source's readers skip: mapped to ids no column has, and that
        // last-column-id keeps from ever being handed out.
        let last_column_id = current.map_or(0, |m| m.last_column_id());
        let reserved = reserved_mappings(
            ignored,
            converted,
            &mapping,
            previous.as_ref(),
            first_free_id(schema, converted, last_column_id),
        );
        let highest_reserved = reserved.iter().filter_map(|f| f.field_id()).max();
        if !reserved.is_empty() {
            mapping = NameMapping::new(mapping.fields().iter().cloned().chain(reserved).collect());
        }
        if let Some(previous) = &previous {
            mapping = merge_mappings(&mapping, previous);
        }
        properties.insert(DEFAULT_SCHEMA_NAME_MAPPING.into(), json(&mapping));
        (properties, highest_reserved, mapping)
    }

    /// The refusal a commit meets for `declared` before anything is written: a column v2
    /// has no type for, when the table is not v3.
    pub(crate) fn refuse_empty(&self, declared: &DeclaredTable) -> Result<()> {
        let not_representable = self.not_representable("(none: the table has no completed commit)");
        // The same refusal a commit meets: v2 has no type for these columns.
        if self.target_version(None)? < iceberg::spec::FormatVersion::V3 {
            if let Some((column, reason)) = crate::ops::v3::needs_v3(&declared.schema) {
                return Err(not_representable(SchemaProblem { column, reason }));
            }
        }
        Ok(())
    }

    /// The metadata of a table with `declared`'s schema and partition spec and no snapshot
    /// (see [`IcebergTable::create_empty`]).
    pub(crate) fn empty_table(&self, declared: &DeclaredTable) -> Result<TableMetadata> {
        let not_representable = self.not_representable("(none: the table has no completed commit)");
        let (converted, aliases) =
            to_iceberg_schema(&declared.schema, None, &[], 0, 0).map_err(&not_representable)?;
        let unbound =
            to_unbound_spec(&declared.partition_spec, &converted).map_err(&not_representable)?;
        let (mut properties, reserved, _) = self.commit_properties(
            &declared.schema,
            (&converted, &aliases),
            &declared.ignored_columns,
            None,
        );
        properties.insert(
            SOURCE_FORMAT_PROPERTY.into(),
            declared.format.as_str().into(),
        );
        self.empty_metadata(&converted, &unbound, &properties, reserved)
    }

    /// A builder holding the schema, spec and properties of this commit (no snapshot yet);
    /// `last-column-id` is raised to the plan's reserved ids (of ignored file columns) if
    /// below.
    pub(super) fn base_builder(
        &self,
        draft: &Draft<'_>,
        plan: &SchemaPlan,
    ) -> Result<TableMetadataBuilder> {
        let err = self.spec_error("apply schema and partition spec");
        let Some(metadata) = &draft.metadata else {
            let empty = self.empty_metadata(
                &plan.converted,
                &plan.unbound,
                &plan.properties,
                plan.reserved,
            )?;
            return Ok(TableMetadataBuilder::new_from_metadata(empty, None));
        };
        // Only the published version a draft starts from enters the metadata log.
        let previous = draft
            .base
            .map(|l| self.store.absolute(&metadata_file(l.version)));
        let raised = match plan.reserved {
            Some(id) if id > metadata.last_column_id() => {
                self.with_last_column_id(metadata.clone(), id)?
            }
            _ => metadata.clone(),
        };
        let mut builder = TableMetadataBuilder::new_from_metadata(raised, previous);
        if plan.changed {
            builder = builder
                .add_current_schema(plan.converted.clone())
                .map_err(&err)?;
        }
        if !same_fields(metadata.default_partition_spec(), &plan.unbound) {
            builder = builder
                .add_default_partition_spec(plan.unbound.clone())
                .map_err(&err)?;
        }
        let stale = plan
            .properties
            .iter()
            .any(|(k, v)| metadata.properties().get(k) != Some(v));
        if stale {
            builder = builder
                .set_properties(plan.properties.clone())
                .map_err(&err)?;
        }
        // A commit without a source state leaves none of an older commit behind.
        if !plan.properties.contains_key(SOURCE_STATE)
            && metadata.properties().contains_key(SOURCE_STATE)
        {
            builder = builder
                .remove_properties(&[SOURCE_STATE.to_string()])
                .map_err(&err)?;
        }
        Ok(builder)
    }

    /// Metadata of a new table with no snapshot, holding `schema` with its ids as they are
    /// (iceberg-rust's `TableMetadataBuilder::new` would renumber them, losing ids a source
    /// assigned, such as Delta column mapping ids that data files carry).
    fn empty_metadata(
        &self,
        schema: &IcebergSchema,
        unbound: &UnboundPartitionSpec,
        properties: &HashMap<String, String>,
        reserved: Option<i32>,
    ) -> Result<TableMetadata> {
        let err = self.spec_error("create table metadata");
        let spec = IcebergSpec::builder(schema.clone())
            .with_spec_id(0)
            .add_unbound_fields(unbound.fields().iter().cloned())
            .and_then(|b| b.build())
            .map_err(&err)?;
        let version = self.target_version(None)?;
        let mut value = serde_json::json!({
            "format-version": crate::ops::v3::version_number(version),
            "table-uuid": uuid::Uuid::new_v4().to_string(),
            "location": self.store.location(),
            "last-sequence-number": 0,
            "last-updated-ms": 0,
            "last-column-id": schema.highest_field_id().max(reserved.unwrap_or(0)),
            "current-schema-id": schema.schema_id(),
            "schemas": [schema],
            "default-spec-id": 0,
            "partition-specs": [spec],
            "last-partition-id": spec.fields().iter().map(|f| f.field_id).max().unwrap_or(999),
            "default-sort-order-id": 0,
            "sort-orders": [SortOrder::unsorted_order()],
            "properties": properties,
            "snapshots": [],
            "snapshot-log": [],
            "metadata-log": [],
            "refs": {},
        });
        if version >= iceberg::spec::FormatVersion::V3 {
            value["next-row-id"] = 0.into();
        }
        serde_json::from_value(value)
            .map_err(|e| self.corrupt(METADATA_DIR, format!("new table metadata: {e}")))
    }

    /// `metadata` with `last-column-id` set to `id` (iceberg-rust's builder only raises it
    /// to the schemas' highest id; ids of ignored file columns must count too).
    fn with_last_column_id(&self, metadata: TableMetadata, id: i32) -> Result<TableMetadata> {
        let invalid = |e: serde_json::Error| {
            self.corrupt(METADATA_DIR, format!("raising last-column-id: {e}"))
        };
        let mut value = serde_json::to_value(&metadata).map_err(invalid)?;
        value["last-column-id"] = id.into();
        serde_json::from_value(value).map_err(invalid)
    }
}
